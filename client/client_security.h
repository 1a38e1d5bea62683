// ClientSecurity: how a client reaches a secured kvsessiond: TLS (server CA,
// optionally a client certificate for mutual TLS) and an API key.
//
// ClientSecurityFromFiles reads the PEM files named by the CLI's --tls-ca,
// --tls-cert and --tls-key; NOT_FOUND naming the flag and path when one
// cannot be read, INVALID_ARGUMENT when --tls-cert and --tls-key are not
// given together. An empty api_key falls back to the KVSESSION_API_KEY
// environment variable (ApiKeyFromEnvironment). Pure, thread-safe.
#ifndef KVSESSION_CLIENT_CLIENT_SECURITY_H_
#define KVSESSION_CLIENT_CLIENT_SECURITY_H_

#include <memory>
#include <string>

#include <grpcpp/security/credentials.h>

#include "absl/status/statusor.h"

namespace kvs {

struct ClientSecurity {
  bool tls = false;             // connect with TLS
  std::string root_certs_pem;   // CA to verify the server ("" = the system's roots)
  std::string cert_chain_pem;   // client certificate (mutual TLS), "" for none
  std::string private_key_pem;  // its key
  std::string api_key;          // sent as authorization: Bearer KEY ("" = none)
  // Sent as x-kvsession-tenant: T on every call ("" = none): an admin key
  // acting for tenant T (docs/api.md "Tenants and keys").
  std::string as_tenant;
};

// TLS when any of `ca_path`, `cert_path`, `key_path` is given (or `tls`).
absl::StatusOr<ClientSecurity> ClientSecurityFromFiles(const std::string& ca_path, const std::string& cert_path,
                                                       const std::string& key_path, const std::string& api_key,
                                                       bool tls = false);

// $KVSESSION_API_KEY, or "".
std::string ApiKeyFromEnvironment();

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const ClientSecurity& security);

}  // namespace kvs

#endif  // KVSESSION_CLIENT_CLIENT_SECURITY_H_
