// Principal: who is calling (the tenant an API key belongs to, and its
// role). Without --auth-keys every caller is the default tenant, a user.
#ifndef KVSESSION_SERVICE_AUTH_PRINCIPAL_H_
#define KVSESSION_SERVICE_AUTH_PRINCIPAL_H_

#include <string>
#include <string_view>

namespace kvs {

// The tenant of callers when authentication is off, and of sessions stored
// before ownership existed (records with an empty owner).
inline constexpr char kDefaultTenant[] = "default";

enum class Role { kUser, kAdmin };

struct Principal {
  std::string tenant = kDefaultTenant;
  Role role = Role::kUser;
  // When an admin key acts for `tenant` (x-kvsession-tenant, call_auth.h):
  // the admin key's own tenant (the caller is then a user of `tenant`);
  // "" otherwise. For the audit log.
  std::string acting_admin;
  bool is_admin() const { return role == Role::kAdmin; }
};

// A tenant name: 1-64 of [A-Za-z0-9_.-].
inline bool IsTenantName(std::string_view t) {
  if (t.empty() || t.size() > 64) return false;
  for (char c : t) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace kvs

#endif  // KVSESSION_SERVICE_AUTH_PRINCIPAL_H_
