#include "service/auth/call_auth.h"

#include <string_view>

namespace kvs {

absl::StatusOr<Principal> AuthenticateKey(const Authenticator* authenticator, const grpc::ServerContextBase& ctx) {
  if (authenticator == nullptr) return Principal{};
  const auto& metadata = ctx.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) return authenticator->Authenticate(std::nullopt);
  return authenticator->Authenticate(std::string_view(it->second.data(), it->second.size()));
}

absl::StatusOr<Principal> AuthenticateCall(const Authenticator* authenticator,
                                           const grpc::ServerContextBase& ctx) {
  absl::StatusOr<Principal> principal = AuthenticateKey(authenticator, ctx);
  if (!principal.ok()) return principal;
  const auto& metadata = ctx.client_metadata();
  const auto [begin, end] = metadata.equal_range(kActAsTenantHeader);
  if (begin == end) return principal;
  if (!principal->is_admin()) {
    return absl::PermissionDeniedError("only an admin key may act for a tenant (x-kvsession-tenant)");
  }
  const std::string_view tenant(begin->second.data(), begin->second.size());
  if (std::next(begin) != end || !IsTenantName(tenant)) {
    return absl::InvalidArgumentError("x-kvsession-tenant must be one tenant name of 1-64 [A-Za-z0-9_.-]");
  }
  Principal acting;
  acting.tenant = std::string(tenant);
  acting.role = Role::kUser;
  acting.acting_admin = principal->tenant;
  return acting;
}

}  // namespace kvs
