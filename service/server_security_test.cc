#include "service/server_security.h"

#include "gtest/gtest.h"

namespace kvs {
namespace {

TEST(ServerSecurity, LoopbackAddressesAreRecognised) {
  for (const char* a : {"127.0.0.1:50051", "127.0.0.1:0", "127.1.2.3:80", "localhost:50051", "[::1]:50051",
                        "unix:/run/kvs.sock", "unix-abstract:kvs"}) {
    EXPECT_TRUE(IsLoopbackListen(a)) << a;
  }
  for (const char* a : {"0.0.0.0:50051", "[::]:50051", "10.0.0.5:50051", "kvs.example:50051",
                        "127.0.0.1.evil.example:50051", ":50051"}) {
    EXPECT_FALSE(IsLoopbackListen(a)) << a;
  }
}

TEST(ServerSecurity, ANonLoopbackListenNeedsKeysOrAnExplicitInsecureFlag) {
  EXPECT_TRUE(CheckListenPolicy("127.0.0.1:1", false, false).ok());
  EXPECT_TRUE(CheckListenPolicy("0.0.0.0:1", true, false).ok());
  EXPECT_TRUE(CheckListenPolicy("0.0.0.0:1", false, true).ok());
  const absl::Status refused = CheckListenPolicy("0.0.0.0:1", false, false);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("--insecure-no-auth"), std::string::npos);
}

TEST(ServerSecurity, TlsFlagsThatDoNotGoTogetherAreRefused) {
  EXPECT_TRUE(ServerCredentialsFor({}).ok());
  EXPECT_EQ(ServerCredentialsFor({.cert = "c.pem", .key = "", .client_ca = ""}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ServerCredentialsFor({.cert = "", .key = "k.pem", .client_ca = ""}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ServerCredentialsFor({.cert = "", .key = "", .client_ca = "ca.pem"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  const auto missing =
      ServerCredentialsFor({.cert = "/nonexistent/c.pem", .key = "/nonexistent/k.pem", .client_ca = ""});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/c.pem"), std::string::npos);
}

}  // namespace
}  // namespace kvs
