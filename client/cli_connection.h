// The `kvsession` remote commands' connection flags:
//   --server ADDR (default 127.0.0.1:50051)
//   --tls-ca PEM          TLS, verifying the server against this CA
//   --tls                 TLS with the system's root CAs
//   --tls-cert PEM --tls-key PEM   client certificate (mutual TLS)
//   --api-key KEY         or $KVSESSION_API_KEY: authorization: Bearer KEY
//   --as-tenant T         x-kvsession-tenant: T (an admin key acting for T)
// ConnectionValueFlags/ConnectionBoolFlags are the names a command declares
// (cli_args.h). ConnectFromFlags: ClientSecurityFromFiles's statuses, and
// INVALID_ARGUMENT for any of these flags given an empty value (never taken
// as "not given", which would drop TLS without a word).
#ifndef KVSESSION_CLIENT_CLI_CONNECTION_H_
#define KVSESSION_CLIENT_CLI_CONNECTION_H_

#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "client/cli_args.h"
#include "client/kvsession_client.h"

namespace kvs {

const std::set<std::string>& ConnectionValueFlags();
const std::set<std::string>& ConnectionBoolFlags();

absl::StatusOr<std::unique_ptr<KvSessionClient>> ConnectFromFlags(const CliArgs& args);

}  // namespace kvs

#endif  // KVSESSION_CLIENT_CLI_CONNECTION_H_
