// AuthenticateCall and AuthenticateKey on a real grpc::ServerContext whose
// client metadata is set by gRPC's own test spouse (the metadata a call
// arrives with), against a real Authenticator: who a call is, and every
// status call_auth.h names.
#include "service/auth/call_auth.h"

#include <grpcpp/server_context.h>
#include <grpcpp/test/server_context_test_spouse.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace kvs {
namespace {

using grpc::testing::ServerContextTestSpouse;

Authenticator UserAndAdmin() {
  absl::StatusOr<ApiKeyFile> file = ParseApiKeyFile("acme user " + Sha256Hex("acme-key") + "\n" +
                                                    "root admin " + Sha256Hex("root-key") + "\n");
  EXPECT_TRUE(file.ok()) << file.status();
  return Authenticator(*file);
}

// A call's metadata: (key, value) headers as the client sent them, in order.
using Headers = std::vector<std::pair<std::string, std::string>>;

// A server context carrying `headers` as the call's client metadata.
class Call {
 public:
  explicit Call(const Headers& headers) : spouse_(&ctx_) {
    for (const auto& [key, value] : headers) spouse_.AddClientMetadata(key, value);
  }
  const grpc::ServerContextBase& ctx() const { return ctx_; }

 private:
  grpc::ServerContext ctx_;
  ServerContextTestSpouse spouse_;  // must outlive every read of the metadata
};

TEST(CallAuth, WithoutKeysEveryCallIsTheDefaultTenantsUserWhateverItsAuthorizationSays) {
  for (const std::string header : {"", "Bearer root-key", "garbage"}) {
    Call call(header.empty() ? Headers{} : Headers{{"authorization", header}});
    absl::StatusOr<Principal> p = AuthenticateCall(nullptr, call.ctx());
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->tenant, kDefaultTenant);
    EXPECT_FALSE(p->is_admin());
    EXPECT_EQ(p->acting_admin, "");
  }
}

TEST(CallAuth, WithoutKeysNoCallMayActForATenant) {
  Call call(Headers{{"x-kvsession-tenant", "acme"}});
  absl::StatusOr<Principal> p = AuthenticateCall(nullptr, call.ctx());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(p.status().message(), "only an admin key may act for a tenant (x-kvsession-tenant)");
}

TEST(CallAuth, AKeyFromTheFileIsItsTenantAndRole) {
  const Authenticator auth = UserAndAdmin();
  Call user(Headers{{"authorization", "Bearer acme-key"}});
  absl::StatusOr<Principal> p = AuthenticateCall(&auth, user.ctx());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->tenant, "acme");
  EXPECT_FALSE(p->is_admin());

  Call admin(Headers{{"authorization", "Bearer root-key"}});
  p = AuthenticateCall(&auth, admin.ctx());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->tenant, "root");
  EXPECT_TRUE(p->is_admin());
  EXPECT_EQ(p->acting_admin, "");
}

TEST(CallAuth, AMissingOrWrongKeyIsUnauthenticatedBeforeTheTenantHeaderIsLookedAt) {
  const Authenticator auth = UserAndAdmin();
  Call missing(Headers{{"x-kvsession-tenant", "not a tenant name"}});
  absl::StatusOr<Principal> p = AuthenticateCall(&auth, missing.ctx());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(p.status().message(), "missing API key (send authorization: Bearer KEY)");

  Call wrong(Headers{{"authorization", "Bearer root-kez"}, {"x-kvsession-tenant", "acme"}});
  p = AuthenticateCall(&auth, wrong.ctx());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(p.status().message(), "invalid API key");
}

TEST(CallAuth, AUserKeyMayNotActForATenantNotEvenItsOwn) {
  const Authenticator auth = UserAndAdmin();
  for (const char* tenant : {"acme", "other"}) {
    Call call(Headers{{"authorization", "Bearer acme-key"}, {"x-kvsession-tenant", tenant}});
    absl::StatusOr<Principal> p = AuthenticateCall(&auth, call.ctx());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kPermissionDenied) << tenant;
  }
}

TEST(CallAuth, AnAdminActingForATenantIsAUserOfThatTenantAndNamesTheAdminsTenant) {
  const Authenticator auth = UserAndAdmin();
  // The tenant need not be in the keys file.
  Call call(Headers{{"authorization", "Bearer root-key"}, {"x-kvsession-tenant", "team-7.eu_west"}});
  absl::StatusOr<Principal> p = AuthenticateCall(&auth, call.ctx());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->tenant, "team-7.eu_west");
  EXPECT_FALSE(p->is_admin());
  EXPECT_EQ(p->acting_admin, "root");
}

TEST(CallAuth, AMalformedOrRepeatedTenantHeaderIsInvalidArgumentWithoutEchoingIt) {
  const Authenticator auth = UserAndAdmin();
  const std::string too_long(65, 'q');
  for (const std::vector<std::string>& values : std::vector<std::vector<std::string>>{
           {""}, {too_long}, {"acme corp"}, {"acme/../root"}, {"zz\xc3\xa9zz"}, {"acme", "acme"}, {"acme", "qqq"}}) {
    Headers headers = {{"authorization", "Bearer root-key"}};
    for (const std::string& v : values) headers.emplace_back("x-kvsession-tenant", v);
    Call call(headers);
    absl::StatusOr<Principal> p = AuthenticateCall(&auth, call.ctx());
    ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << values.size() << " " << values[0].size();
    EXPECT_EQ(p.status().message(), "x-kvsession-tenant must be one tenant name of 1-64 [A-Za-z0-9_.-]");
  }
  // The longest name is accepted.
  Call longest(Headers{{"authorization", "Bearer root-key"}, {"x-kvsession-tenant", std::string(64, 'q')}});
  EXPECT_TRUE(AuthenticateCall(&auth, longest.ctx()).ok());
}

TEST(CallAuth, AuthenticateKeyIsTheKeysOwnPrincipalWhateverTenantIsAskedFor) {
  const Authenticator auth = UserAndAdmin();
  Call admin(Headers{{"authorization", "Bearer root-key"}, {"x-kvsession-tenant", "acme"}});
  absl::StatusOr<Principal> p = AuthenticateKey(&auth, admin.ctx());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->tenant, "root");
  EXPECT_TRUE(p->is_admin());
  // A user sending the header is refused by AuthenticateCall, but the audit
  // log still learns who sent it.
  Call user(Headers{{"authorization", "Bearer acme-key"}, {"x-kvsession-tenant", "root"}});
  p = AuthenticateKey(&auth, user.ctx());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->tenant, "acme");
}

TEST(CallAuth, TheSameCallAuthenticatedAgainAfterItsKeyWasRemovedIsUnauthenticated) {
  const std::string path = std::filesystem::temp_directory_path() /
                           ("call_auth_reload_" + std::to_string(::getpid()) + ".keys");
  std::ofstream(path) << "acme user " << Sha256Hex("acme-key") << "\n";
  absl::StatusOr<std::unique_ptr<Authenticator>> auth = Authenticator::FromFile(path);
  ASSERT_TRUE(auth.ok()) << auth.status();
  Call call(Headers{{"authorization", "Bearer acme-key"}});
  ASSERT_TRUE(AuthenticateCall(auth->get(), call.ctx()).ok());
  EXPECT_TRUE(AuthenticateCall(auth->get(), call.ctx()).ok()) << "the same principal again";

  std::ofstream(path) << "acme user " << Sha256Hex("other-key") << "\n";
  ASSERT_TRUE((*auth)->Reload().ok());
  EXPECT_EQ(AuthenticateCall(auth->get(), call.ctx()).status().code(), absl::StatusCode::kUnauthenticated);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace kvs
