// Test helper: ServiceFixture plus test-time certificates
// (test_certificates.h), an API keys file, and clients with any security.
#ifndef KVSESSION_TESTS_SECURE_FIXTURE_H_
#define KVSESSION_TESTS_SECURE_FIXTURE_H_

#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/client_security.h"
#include "service/auth/api_key_file.h"
#include "tests/service_fixture.h"
#include "tests/test_certificates.h"

namespace kvs {

class SecureFixture : public ServiceFixture {
 protected:
  void SetUp() override {
    ServiceFixture::SetUp();
    if (IsSkipped()) return;
    const std::string error = certs_.Make(dir_ / "certs");
    ASSERT_EQ(error, "");
  }

  // Writes the keys file: one line per {tenant, role, key, [QUOTA=VALUE ...]}.
  std::string WriteKeys(const std::vector<std::vector<std::string>>& entries) {
    const std::string path = (dir_ / "keys.txt").string();
    std::ofstream out(path);
    out << "# tenant role sha256(key) [quota=value ...]\n";
    for (const auto& e : entries) {
      out << e[0] << " " << e[1] << " " << Sha256Hex(e[2]);
      for (size_t i = 3; i < e.size(); ++i) out << " " << e[i];
      out << "\n";
    }
    return path;
  }

  // Waits (up to 5 s) until the server's log holds `text` `times` times.
  bool WaitForLog(const std::string& text, size_t times) const {
    for (int i = 0; i < 500; ++i) {
      const std::string log = server_->log();
      size_t n = 0;
      for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++n;
      if (n >= times) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  // Starts kvsessiond with `flags` without connecting a client.
  void StartRaw(const std::vector<std::string>& flags) {
    server_ = std::make_unique<ServerProcess>();
    ASSERT_TRUE(server_->Start(ModelPath("aidreams260K.gguf"), (dir_ / "data").string(), flags)) << server_->log();
  }

  std::vector<std::string> TlsFlags(bool mutual = false) const {
    std::vector<std::string> f = {"--tls-cert", certs_.path("server.pem"), "--tls-key", certs_.path("server.key")};
    if (mutual) f.insert(f.end(), {"--tls-client-ca", certs_.path("ca.pem")});
    return f;
  }

  // A client of the running server: TLS trusting `ca` ("" = plaintext),
  // with client certificate `cert` ("" = none) and `api_key`.
  std::unique_ptr<KvSessionClient> Client(const std::string& ca, const std::string& cert = "",
                                          const std::string& api_key = "") const {
    absl::StatusOr<ClientSecurity> s = ClientSecurityFromFiles(
        ca.empty() ? "" : certs_.path(ca), cert.empty() ? "" : certs_.path(cert + ".pem"),
        cert.empty() ? "" : certs_.path(cert + ".key"), api_key);
    EXPECT_TRUE(s.ok()) << s.status();
    return std::make_unique<KvSessionClient>(server_->address(), *s);
  }

  TestCertificates certs_;
};

}  // namespace kvs

#endif  // KVSESSION_TESTS_SECURE_FIXTURE_H_
