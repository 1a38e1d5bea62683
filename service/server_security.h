// Server transport security and the listen policy of kvsessiond.
//
// ServerCredentialsFor: without a certificate, plaintext; with --tls-cert
// and --tls-key (PEM files), TLS via gRPC's SslServerCredentials; with
// --tls-client-ca as well, mutual TLS: a client must present a certificate
// signed by that CA or the handshake fails.
//
// CheckListenPolicy: without --auth-keys the server only listens on a
// loopback address (127.0.0.0/8, ::1, localhost, unix: sockets) unless
// --insecure-no-auth says otherwise.
//
// Statuses: INVALID_ARGUMENT for flags that do not go together (a key
// without a certificate, a client CA without TLS, a non-loopback listen
// without keys); NOT_FOUND naming the file that cannot be read. Pure
// functions, thread-safe.
#ifndef KVSESSION_SERVICE_SERVER_SECURITY_H_
#define KVSESSION_SERVICE_SERVER_SECURITY_H_

#include <memory>
#include <string>

#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"

namespace kvs {

struct ServerTlsFiles {
  std::string cert;       // --tls-cert: PEM certificate chain
  std::string key;        // --tls-key: PEM private key
  std::string client_ca;  // --tls-client-ca: PEM CA bundle (mutual TLS)
};

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(const ServerTlsFiles& tls);

// True for 127.0.0.0/8, [::1], localhost and unix: addresses ("host:port").
bool IsLoopbackListen(const std::string& listen);

absl::Status CheckListenPolicy(const std::string& listen, bool have_auth_keys, bool insecure_no_auth);

// Reads a whole file (NOT_FOUND naming `what` and the path).
absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& what);

}  // namespace kvs

#endif  // KVSESSION_SERVICE_SERVER_SECURITY_H_
