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
// With a `quota` (--tenant-quota), tenant load-t0's line of the keys file
// carries it, so that one tenant is refused at its limit and the others
// are not.
//
// MakeLoadIdentities returns INTERNAL naming what failed (openssl, a file
// it could not write). Plain data once made; the keys never leave `dir`'s
// keys file as anything but their SHA-256.
#ifndef KVSESSION_TOOLS_LOAD_LOAD_IDENTITIES_H_
#define KVSESSION_TOOLS_LOAD_LOAD_IDENTITIES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "client/client_security.h"

namespace kvs::load {

// One quota of the keys file (service/auth/api_key_file.h), as
// --tenant-quota gives it: "max_sessions=4".
struct LoadQuota {
  std::string name;   // max_sessions, max_kv_bytes, ...
  int64_t limit = 0;  // > 0
};

// INVALID_ARGUMENT unless `text` is one QUOTA=VALUE the keys file takes,
// with a VALUE above 0 (0 would mean unlimited).
absl::StatusOr<LoadQuota> ParseLoadQuota(std::string_view text);

struct Caller {
  std::string tenant;  // "" without --tenants (the server's default tenant)
  ClientSecurity security;
  std::optional<LoadQuota> quota;  // the tenant's, when the tool gave it one
};

struct LoadIdentities {
  std::vector<std::string> server_flags;  // --auth-keys, --tls-cert, --tls-key as made
  std::vector<Caller> tenants;            // at least one
  Caller admin;                           // the controller's own calls (info, checks)
};

// `quota` needs `tenants` > 0: it is tenant load-t0's.
absl::StatusOr<LoadIdentities> MakeLoadIdentities(const std::string& dir, int tenants, bool tls,
                                                  const std::optional<LoadQuota>& quota = std::nullopt);

}  // namespace kvs::load

#endif  // KVSESSION_TOOLS_LOAD_LOAD_IDENTITIES_H_
