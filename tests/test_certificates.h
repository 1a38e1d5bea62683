// Test helper: certificates made with the `openssl` command at test time
// in a temporary directory (no key is ever committed):
//   ca.pem                the CA the server and the good client chain to
//   server.pem/.key       signed by ca, SAN IP:127.0.0.1 and DNS:localhost
//   client.pem/.key       signed by ca (for mutual TLS)
//   other-ca.pem          a second, unrelated CA
//   other-client.pem/.key signed by other-ca (the "wrong client
//                         certificate")
#ifndef KVSESSION_TESTS_TEST_CERTIFICATES_H_
#define KVSESSION_TESTS_TEST_CERTIFICATES_H_

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/subprocess.h"

namespace kvs {

class TestCertificates {
 public:
  // Makes every file in `dir` (created). Returns "" or what failed.
  std::string Make(const std::filesystem::path& dir) {
    dir_ = dir;
    std::filesystem::create_directories(dir);
    std::ofstream(path("server.ext")) << "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                         "extendedKeyUsage=serverAuth\n";
    std::ofstream(path("client.ext")) << "extendedKeyUsage=clientAuth\n";
    for (const std::string ca : {"ca", "other-ca"}) {
      if (std::string e = Openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                   "-nodes", "-keyout", path(ca + ".key"), "-out", path(ca + ".pem"), "-days",
                                   "2", "-subj", "/CN=kvs-test-" + ca});
          !e.empty()) {
        return e;
      }
    }
    if (std::string e = Leaf("server", "ca", "localhost", "server.ext"); !e.empty()) return e;
    if (std::string e = Leaf("client", "ca", "tenant-client", "client.ext"); !e.empty()) return e;
    return Leaf("other-client", "other-ca", "stranger", "client.ext");
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  std::string Leaf(const std::string& name, const std::string& ca, const std::string& cn, const std::string& ext) {
    if (std::string e = Openssl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                 "-nodes", "-keyout", path(name + ".key"), "-out", path(name + ".csr"), "-subj",
                                 "/CN=" + cn});
        !e.empty()) {
      return e;
    }
    return Openssl({"x509", "-req", "-in", path(name + ".csr"), "-CA", path(ca + ".pem"), "-CAkey",
                    path(ca + ".key"), "-CAcreateserial", "-out", path(name + ".pem"), "-days", "2", "-extfile",
                    path(ext)});
  }

  std::string Openssl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"/usr/bin/openssl"};
    argv.insert(argv.end(), args.begin(), args.end());
    const ProcessResult r = RunProcess(argv, dir_.string());
    if (r.exit_code == 0) return "";
    return "openssl " + args[0] + " failed (" + std::to_string(r.exit_code) + "): " + r.err;
  }

  std::filesystem::path dir_;
};

}  // namespace kvs

#endif  // KVSESSION_TESTS_TEST_CERTIFICATES_H_
