#include "service/auth/authenticator.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace kvs {
namespace {

Authenticator TwoTenants() {
  absl::StatusOr<ApiKeyFile> file = ParseApiKeyFile("acme user " + Sha256Hex("acme-key") + "\n" +
                                                    "root admin " + Sha256Hex("root-key") + "\n");
  EXPECT_TRUE(file.ok());
  return Authenticator(*file);
}

TEST(Authenticator, ABearerKeyFromTheFileIsItsTenantAndRole) {
  Authenticator auth = TwoTenants();
  absl::StatusOr<Principal> p = auth.Authenticate("Bearer acme-key");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->tenant, "acme");
  EXPECT_FALSE(p->is_admin());
  p = auth.Authenticate("bearer root-key");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->tenant, "root");
  EXPECT_TRUE(p->is_admin());
}

TEST(Authenticator, MissingMalformedOrWrongKeysAreUnauthenticatedWithoutEchoingTheKey) {
  Authenticator auth = TwoTenants();
  for (const std::optional<std::string_view> header :
       {std::optional<std::string_view>(), std::optional<std::string_view>("acme-key"),
        std::optional<std::string_view>("Basic acme-key"), std::optional<std::string_view>("Bearer "),
        std::optional<std::string_view>("Bearer acme-kez"), std::optional<std::string_view>("Bearer ACME-KEY")}) {
    absl::StatusOr<Principal> p = auth.Authenticate(header);
    ASSERT_FALSE(p.ok()) << header.value_or("(none)");
    EXPECT_EQ(p.status().code(), absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(p.status().message().find("acme"), std::string::npos) << p.status();
    EXPECT_EQ(p.status().message().find("ACME"), std::string::npos) << p.status();
  }
}

TEST(Authenticator, ReloadSwapsTheKeysAndABadFileKeepsTheOldOnes) {
  const std::string path = std::filesystem::temp_directory_path() /
                           ("auth_reload_" + std::to_string(::getpid()) + ".keys");
  std::ofstream(path) << "acme user " << Sha256Hex("old-key") << "\n";
  absl::StatusOr<std::unique_ptr<Authenticator>> auth = Authenticator::FromFile(path);
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_TRUE((*auth)->Authenticate("Bearer old-key").ok());

  std::ofstream(path) << "acme user " << Sha256Hex("new-key") << "\n";
  ASSERT_TRUE((*auth)->Reload().ok());
  EXPECT_EQ((*auth)->Authenticate("Bearer old-key").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE((*auth)->Authenticate("Bearer new-key").ok());

  std::ofstream(path) << "acme superuser " << Sha256Hex("newer-key") << "\n";
  EXPECT_EQ((*auth)->Reload().status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*auth)->Authenticate("Bearer new-key").ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace kvs
