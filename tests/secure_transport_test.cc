// TLS and mutual TLS over a real socket: the real kvsessiond with
// certificates made by openssl at test time (issue 10, item 5).
#include "gtest/gtest.h"
#include "tests/secure_fixture.h"

namespace kvs {
namespace {

using SecureTransportTest = SecureFixture;

constexpr auto kConnect = std::chrono::seconds(10);

TEST_F(SecureTransportTest, ATlsServerServesAClientThatTrustsItsCa) {
  StartRaw(TlsFlags());
  std::unique_ptr<KvSessionClient> client = Client("ca.pem");
  ASSERT_TRUE(client->WaitForServer(kConnect));
  absl::StatusOr<v1::Session> s = client->CreateSession("Once upon a time");
  ASSERT_TRUE(s.ok()) << s.status();
  v1::GenerateRequest req;
  req.set_session_id(s->id());
  req.set_max_tokens(4);
  absl::StatusOr<GenerateResult> r = client->Generate(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ids.size(), 4u);
  EXPECT_NE(server_->log().find("transport: TLS"), std::string::npos) << server_->log();
}

TEST_F(SecureTransportTest, APlaintextClientGetsNothingFromATlsServer) {
  StartRaw(TlsFlags());
  std::unique_ptr<KvSessionClient> client = Client("");
  absl::StatusOr<v1::ServerInfo> info = client->GetServerInfo();
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable) << info.status();
}

TEST_F(SecureTransportTest, AClientThatDoesNotTrustTheServersCaRefusesIt) {
  StartRaw(TlsFlags());
  std::unique_ptr<KvSessionClient> client = Client("other-ca.pem");
  absl::StatusOr<v1::ServerInfo> info = client->GetServerInfo();
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable) << info.status();
}

TEST_F(SecureTransportTest, MutualTlsServesAClientCertificateFromTheClientCa) {
  StartRaw(TlsFlags(/*mutual=*/true));
  std::unique_ptr<KvSessionClient> client = Client("ca.pem", "client");
  absl::StatusOr<v1::ServerInfo> info = client->GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_NE(server_->log().find("mutual TLS"), std::string::npos) << server_->log();
}

TEST_F(SecureTransportTest, MutualTlsRefusesAClientWithoutACertificate) {
  StartRaw(TlsFlags(/*mutual=*/true));
  std::unique_ptr<KvSessionClient> client = Client("ca.pem");
  absl::StatusOr<v1::ServerInfo> info = client->GetServerInfo();
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable) << info.status();
}

TEST_F(SecureTransportTest, MutualTlsRefusesAClientCertificateFromAnotherCa) {
  StartRaw(TlsFlags(/*mutual=*/true));
  std::unique_ptr<KvSessionClient> client = Client("ca.pem", "other-client");
  absl::StatusOr<v1::ServerInfo> info = client->GetServerInfo();
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable) << info.status();
  // The server still serves the right certificate afterwards.
  EXPECT_TRUE(Client("ca.pem", "client")->GetServerInfo().ok());
}

TEST_F(SecureTransportTest, TheServerRefusesToStartWithAKeyButNoCertificate) {
  server_ = std::make_unique<ServerProcess>();
  EXPECT_FALSE(server_->Start(ModelPath("aidreams260K.gguf"), (dir_ / "data").string(),
                              {"--tls-key", certs_.path("server.key")}));
  EXPECT_NE(server_->log().find("--tls-cert and --tls-key go together"), std::string::npos) << server_->log();
}

TEST_F(SecureTransportTest, TheCliTalksTlsWithItsCaAndClientCertificate) {
  StartRaw(TlsFlags(/*mutual=*/true));
  const ProcessResult r = RunProcess({BinaryPath("kvsession"), "info", "--json", "--server", server_->address(),
                                      "--tls-ca", certs_.path("ca.pem"), "--tls-cert", certs_.path("client.pem"),
                                      "--tls-key", certs_.path("client.key")},
                                     dir_.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("aidreams260K"), std::string::npos) << r.out;
  const ProcessResult plain =
      RunProcess({BinaryPath("kvsession"), "info", "--server", server_->address()}, dir_.string());
  EXPECT_NE(plain.exit_code, 0);
  EXPECT_NE(plain.err.find("UNAVAILABLE"), std::string::npos) << plain.err;
}

}  // namespace
}  // namespace kvs
