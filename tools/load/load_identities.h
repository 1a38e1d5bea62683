// LoadIdentities: who the load tool's clients are and how they reach the
// server.
//
// Without tenants and TLS: one caller, the server's default tenant, over
// plaintext, and no server flags. With `tenants` = N > 0: an --auth-keys
// file in `dir` naming N user tenants (load-t0 ... load-t<N-1>) and one
// admin (load-admin), each with a fresh random key, so every call carries
// a key and every session belongs to one tenant. With `tls`: certificates
// made with the openssl command in `dir`/certs (tests/test_certificates.h),
// the server given --tls-cert/--tls-key and every caller trusting the CA.
//
// MakeLoadIdentities returns INTERNAL naming what failed (openssl, a file
// it could not write). Plain data once made; the keys never leave `dir`'s
// keys file as anything but their SHA-256.
#ifndef KVSESSION_TOOLS_LOAD_LOAD_IDENTITIES_H_
#define KVSESSION_TOOLS_LOAD_LOAD_IDENTITIES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/client_security.h"

namespace kvs::load {

struct Caller {
  std::string tenant;  // "" without --tenants (the server's default tenant)
  ClientSecurity security;
};

struct LoadIdentities {
  std::vector<std::string> server_flags;  // --auth-keys, --tls-cert, --tls-key as made
  std::vector<Caller> tenants;            // at least one
  Caller admin;                           // the controller's own calls (info, checks)
};

absl::StatusOr<LoadIdentities> MakeLoadIdentities(const std::string& dir, int tenants, bool tls);

}  // namespace kvs::load

#endif  // KVSESSION_TOOLS_LOAD_LOAD_IDENTITIES_H_
