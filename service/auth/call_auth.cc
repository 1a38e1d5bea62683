#include "service/auth/call_auth.h"

namespace kvs {

absl::StatusOr<Principal> AuthenticateCall(const Authenticator* authenticator,
                                           const grpc::ServerContextBase& ctx) {
  if (authenticator == nullptr) return Principal{};
  const auto& metadata = ctx.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) return authenticator->Authenticate(std::nullopt);
  return authenticator->Authenticate(std::string_view(it->second.data(), it->second.size()));
}

}  // namespace kvs
