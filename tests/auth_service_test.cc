// API keys over a real socket (issue 10, item 1): every method refuses a
// call without a valid key, keys reload on SIGHUP, and without keys the
// server stays on loopback.
#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <thread>

#include "gtest/gtest.h"
#include "tests/raw_call.h"
#include "tests/secure_fixture.h"

namespace kvs {
namespace {

using AuthServiceTest = SecureFixture;

TEST_F(AuthServiceTest, EveryMethodRefusesACallWithoutAValidKeyAsUnauthenticated) {
  StartRaw({"--auth-keys", WriteKeys({{"acme", "user", "acme-secret-key"}})});
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(v1::KvSession::service_full_name());
  ASSERT_NE(service, nullptr);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string method = service->method(i)->name();
    // No key; then a wrong key (also with a request that would not parse:
    // authentication comes first).
    RawReply none = RawCall(channel, KvSessionMethod(method), {""});
    EXPECT_EQ(none.status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << method;
    EXPECT_NE(none.status.error_message().find("missing API key"), std::string::npos) << method;
  }
  std::unique_ptr<KvSessionClient> wrong = Client("", "", "acme-secret-kez");
  absl::StatusOr<v1::Session> s = wrong->CreateSession("Once upon a time");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(s.status().message(), "invalid API key");
  v1::GenerateRequest req;
  req.set_session_id("s-whatever");
  req.set_max_tokens(1);
  EXPECT_EQ(wrong->Generate(req).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(wrong->ListAllSessions().status().code(), absl::StatusCode::kUnauthenticated);

  std::unique_ptr<KvSessionClient> right = Client("", "", "acme-secret-key");
  s = right->CreateSession("Once upon a time");
  ASSERT_TRUE(s.ok()) << s.status();
  req.set_session_id(s->id());
  EXPECT_TRUE(right->Generate(req).ok());
  // Neither key, nor its hash, ever reaches the log.
  const std::string log = server_->log();
  EXPECT_EQ(log.find("acme-secret"), std::string::npos) << log;
  EXPECT_EQ(log.find(Sha256Hex("acme-secret-key")), std::string::npos) << log;
  EXPECT_NE(log.find("1 API keys of 1 tenants"), std::string::npos) << log;
}

TEST_F(AuthServiceTest, KeysAndMutualTlsWorkTogether) {
  std::vector<std::string> flags = TlsFlags(/*mutual=*/true);
  flags.insert(flags.end(), {"--auth-keys", WriteKeys({{"acme", "user", "k1"}})});
  StartRaw(flags);
  EXPECT_EQ(Client("ca.pem", "client")->GetServerInfo().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(Client("ca.pem", "client", "k1")->GetServerInfo().ok());
}

TEST_F(AuthServiceTest, SighupReloadsTheKeysAndABadFileKeepsTheOldOnes) {
  const std::string keys = WriteKeys({{"acme", "user", "old-key"}});
  StartRaw({"--auth-keys", keys});
  ASSERT_TRUE(Client("", "", "old-key")->GetServerInfo().ok());

  auto wait_for_log = [&](const std::string& text, size_t times) {
    for (int i = 0; i < 500; ++i) {
      const std::string log = server_->log();
      size_t n = 0;
      for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++n;
      if (n >= times) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  WriteKeys({{"acme", "user", "new-key"}, {"beta", "admin", "beta-key"}});
  ::kill(server_->pid(), SIGHUP);
  ASSERT_TRUE(wait_for_log("SIGHUP: reloaded 2 API keys of 2 tenants", 1)) << server_->log();
  EXPECT_EQ(Client("", "", "old-key")->GetServerInfo().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(Client("", "", "new-key")->GetServerInfo().ok());
  EXPECT_TRUE(Client("", "", "beta-key")->GetServerInfo().ok());

  std::ofstream(keys) << "acme root " << Sha256Hex("newest-key") << "\n";
  ::kill(server_->pid(), SIGHUP);
  ASSERT_TRUE(wait_for_log("SIGHUP: keeping the previous API keys: auth keys line 1: role must be", 1))
      << server_->log();
  EXPECT_TRUE(Client("", "", "new-key")->GetServerInfo().ok());
  EXPECT_EQ(Client("", "", "newest-key")->GetServerInfo().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(server_->Running());
}

TEST_F(AuthServiceTest, WithoutKeysTheServerRefusesANonLoopbackAddressAndSaysWhy) {
  server_ = std::make_unique<ServerProcess>();
  EXPECT_FALSE(server_->Start(ModelPath("aidreams260K.gguf"), (dir_ / "data").string(), {"--listen", "0.0.0.0:0"}));
  EXPECT_NE(server_->log().find("refusing to listen on 0.0.0.0:0 without authentication"), std::string::npos)
      << server_->log();
  EXPECT_NE(server_->log().find("--insecure-no-auth"), std::string::npos) << server_->log();
}

TEST_F(AuthServiceTest, WithoutKeysOnLoopbackTheStartupLogSaysAuthenticationIsOff) {
  StartRaw({});
  EXPECT_TRUE(Client("")->GetServerInfo().ok());
  EXPECT_NE(server_->log().find("authentication: OFF (no --auth-keys)"), std::string::npos) << server_->log();
}

TEST_F(AuthServiceTest, AnUnreadableKeysFileStopsTheServerAtStartup) {
  server_ = std::make_unique<ServerProcess>();
  EXPECT_FALSE(server_->Start(ModelPath("aidreams260K.gguf"), (dir_ / "data").string(),
                              {"--auth-keys", (dir_ / "absent.keys").string()}));
  EXPECT_NE(server_->log().find("cannot read the auth keys file"), std::string::npos) << server_->log();
}

TEST_F(AuthServiceTest, TheCliSendsItsKeyFromTheFlagOrTheEnvironment) {
  StartRaw({"--auth-keys", WriteKeys({{"acme", "user", "cli-key"}})});
  const std::vector<std::string> info = {BinaryPath("kvsession"), "info", "--server", server_->address()};
  ProcessResult r = RunProcess(info, dir_.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("UNAUTHENTICATED"), std::string::npos) << r.err;
  std::vector<std::string> with_flag = info;
  with_flag.insert(with_flag.end(), {"--api-key", "cli-key"});
  r = RunProcess(with_flag, dir_.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ::setenv("KVSESSION_API_KEY", "cli-key", 1);
  r = RunProcess(info, dir_.string());
  ::unsetenv("KVSESSION_API_KEY");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(AuthServiceTest, TheCliActsForATenantWithAnAdminKeyOnly) {
  StartRaw({"--auth-keys", WriteKeys({{"acme", "user", "acme-key"}, {"root", "admin", "root-key"}})});
  const std::vector<std::string> create = {BinaryPath("kvsession"), "create", "--text", "Hello",
                                           "--server", server_->address(), "--as-tenant", "acme"};
  std::vector<std::string> as_admin = create;
  as_admin.insert(as_admin.end(), {"--api-key", "root-key"});
  ProcessResult r = RunProcess(as_admin, dir_.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  absl::StatusOr<std::vector<v1::Session>> acmes = Client("", "", "acme-key")->ListAllSessions();
  ASSERT_TRUE(acmes.ok()) << acmes.status();
  ASSERT_EQ(acmes->size(), 1u);
  EXPECT_NE(r.out.find(acmes->front().id()), std::string::npos) << r.out;

  std::vector<std::string> as_user = create;
  as_user.insert(as_user.end(), {"--api-key", "acme-key"});
  r = RunProcess(as_user, dir_.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("PERMISSION_DENIED"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kvs
