#include "service/auth/api_key_file.h"

#include "gtest/gtest.h"

namespace kvs {
namespace {

const std::string kHashA = Sha256Hex("key-a");
const std::string kHashB = Sha256Hex("key-b");

TEST(ApiKeyFile, Sha256HexIsTheLowercaseHexThatSha256sumPrints) {
  // printf %s abc | sha256sum
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(ApiKeyFile, ParsesTenantsRolesHashesAndQuotasSkippingCommentsAndBlankLines) {
  const std::string text = "# tenants\n\nacme user " + kHashA + " max_sessions=100 max_generates=4  # team A\n" +
                           "\tops admin " + kHashB + "\n";
  absl::StatusOr<ApiKeyFile> file = ParseApiKeyFile(text);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->entries.size(), 2u);
  EXPECT_EQ(file->entries[0].principal.tenant, "acme");
  EXPECT_EQ(file->entries[0].principal.role, Role::kUser);
  EXPECT_EQ(file->entries[0].key_sha256, Sha256("key-a"));
  EXPECT_EQ(file->entries[0].quotas.at("max_sessions"), 100);
  EXPECT_EQ(file->entries[0].quotas.at("max_generates"), 4);
  EXPECT_EQ(file->entries[1].principal.tenant, "ops");
  EXPECT_TRUE(file->entries[1].principal.is_admin());
  EXPECT_EQ(file->tenant_count(), 2u);
}

TEST(ApiKeyFile, AnEmptyFileHasNoKeys) {
  absl::StatusOr<ApiKeyFile> file = ParseApiKeyFile("# nobody yet\n");
  ASSERT_TRUE(file.ok());
  EXPECT_TRUE(file->entries.empty());
}

void ExpectLineError(const std::string& text, int line, const std::string& what) {
  absl::StatusOr<ApiKeyFile> file = ParseApiKeyFile(text);
  ASSERT_FALSE(file.ok()) << text;
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(file.status().message().find("line " + std::to_string(line) + ":"), std::string::npos)
      << file.status();
  EXPECT_NE(file.status().message().find(what), std::string::npos) << file.status();
}

TEST(ApiKeyFile, RejectsMalformedLinesNamingTheLine) {
  ExpectLineError("acme user\n", 1, "expected TENANT ROLE SHA256HEX");
  ExpectLineError("\nacme root " + kHashA + "\n", 2, "role must be user or admin");
  ExpectLineError("acme user " + kHashA.substr(1) + "\n", 1, "64 lowercase hex");
  std::string upper = kHashA;
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  ExpectLineError("acme user " + upper + "\n", 1, "64 lowercase hex");
  ExpectLineError("ac/me user " + kHashA + "\n", 1, "tenant must be");
  ExpectLineError("acme user " + kHashA + " max_sessionz=1\n", 1, "field 4");
  ExpectLineError("acme user " + kHashA + " max_sessions=-1\n", 1, "non-negative");
  ExpectLineError("acme user " + kHashA + "\nbeta user " + kHashA + "\n", 2, "twice");
  ExpectLineError("acme user " + kHashA + " max_sessions=10 max_sessions=0\n", 1, "max_sessions is given twice");
}

TEST(ApiKeyFile, AnErrorNeverEchoesTheFilesText) {
  absl::StatusOr<ApiKeyFile> file = ParseApiKeyFile("acme user not-a-hash-secretish\n");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().message().find("secretish"), std::string::npos) << file.status();
}

TEST(ApiKeyFile, AMissingFileIsNotFoundNamingThePath) {
  absl::StatusOr<ApiKeyFile> file = LoadApiKeyFile("/nonexistent/keys.txt");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("/nonexistent/keys.txt"), std::string::npos);
}

}  // namespace
}  // namespace kvs
