// Principal: who is calling (the tenant an API key belongs to, and its
// role). Without --auth-keys every caller is the default tenant, a user.
#ifndef KVSESSION_SERVICE_AUTH_PRINCIPAL_H_
#define KVSESSION_SERVICE_AUTH_PRINCIPAL_H_

#include <string>

namespace kvs {

// The tenant of callers when authentication is off, and of sessions stored
// before ownership existed (records with an empty owner).
inline constexpr char kDefaultTenant[] = "default";

enum class Role { kUser, kAdmin };

struct Principal {
  std::string tenant = kDefaultTenant;
  Role role = Role::kUser;
  bool is_admin() const { return role == Role::kAdmin; }
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_AUTH_PRINCIPAL_H_
