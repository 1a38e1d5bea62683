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
// With `quotas` (--tenant-quota), tenant load-t0's line of the keys file
// carries them, so that one tenant is refused at its limits and the others
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

// --tenant-quota's value: one or more QUOTA=VALUE of the keys file joined
// by commas ("max_sessions=4,max_store_bytes=300000"), in the order given.
// INVALID_ARGUMENT unless each is a quota the keys file takes with a VALUE
// above 0 (0 would mean unlimited), none named twice.
absl::StatusOr<std::vector<LoadQuota>> ParseLoadQuotas(std::string_view text);
// The same quotas as text, as --tenant-quota took them.
std::string FormatLoadQuotas(const std::vector<LoadQuota>& quotas);

struct Caller {
  std::string tenant;  // "" without --tenants (the server's default tenant)
  ClientSecurity security;
  std::vector<LoadQuota> quotas;  // the tenant's, when the tool gave it some
};

struct LoadIdentities {
  std::vector<std::string> server_flags;  // --auth-keys, --tls-cert, --tls-key as made
  std::vector<Caller> tenants;            // at least one
  Caller admin;                           // the controller's own calls (info, checks)
};

// `quotas` need `tenants` > 0: they are tenant load-t0's.
absl::StatusOr<LoadIdentities> MakeLoadIdentities(const std::string& dir, int tenants, bool tls,
                                                  const std::vector<LoadQuota>& quotas = {});

}  // namespace kvs::load

#endif  // KVSESSION_TOOLS_LOAD_LOAD_IDENTITIES_H_
