// Test helper: a fixture that runs the real kvsessiond binary on a loopback
// port with a temporary data dir and a model from ../shared, and connects
// the C++ client library to it. Each test gets its own directory.
#ifndef KVSESSION_TESTS_SERVICE_FIXTURE_H_
#define KVSESSION_TESTS_SERVICE_FIXTURE_H_

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/kvsession_client.h"
#include "gtest/gtest.h"
#include "tests/reference_data.h"
#include "tests/scratch_dir.h"
#include "tests/server_process.h"

namespace kvs {

namespace v1 = kvsession::v1;

inline std::string ModelPath(const std::string& name) {
  // Appended in place, as BinaryPath (tests/subprocess.h): GCC 12 reports a
  // false -Warray-bounds on a chain of operator+ on a temporary.
  std::string path = SharedDir();
  path.append("/models/").append(name);
  return path;
}

class ServiceFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(ModelPath("aidreams260K.gguf"))) GTEST_SKIP() << "../shared absent";
  }
  void TearDown() override { if (server_ && server_->Running()) server_->Stop(); }

  // Starts a server on `model` (a file in ../shared/models, or a path) and
  // connects a client.
  void StartServer(const std::string& model, std::vector<std::string> flags = {}) {
    server_ = std::make_unique<ServerProcess>();
    const std::string path = model.find('/') == std::string::npos ? ModelPath(model) : model;
    ASSERT_TRUE(server_->Start(path, (dir_ / "data").string(), flags)) << server_->log();
    client_ = std::make_unique<KvSessionClient>(server_->address());
    ASSERT_TRUE(client_->WaitForServer(std::chrono::seconds(10)));
  }

  v1::Session Create(const std::string& text, std::optional<uint64_t> seed = std::nullopt,
                     std::optional<float> temperature = std::nullopt) {
    v1::CreateSessionRequest req;
    if (!text.empty()) req.mutable_input()->set_text(text);
    if (seed) req.mutable_sampling()->set_seed(*seed);
    if (temperature) req.mutable_sampling()->set_temperature(*temperature);
    absl::StatusOr<v1::Session> s = client_->CreateSession(req);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::Session();
  }

  GenerateResult Generate(const std::string& session, int n, std::optional<float> temperature = 0.0f,
                          const std::string& prompt = "") {
    v1::GenerateRequest req;
    req.set_session_id(session);
    req.set_max_tokens(n);
    if (temperature) req.mutable_sampling()->set_temperature(*temperature);
    if (!prompt.empty()) req.mutable_input()->set_text(prompt);
    absl::StatusOr<GenerateResult> r = client_->Generate(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : GenerateResult();
  }

  ScratchDir scratch_{"service_test"};
  const std::filesystem::path dir_ = scratch_.path();  // the test's own directory
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<KvSessionClient> client_;
};

}  // namespace kvs

#endif  // KVSESSION_TESTS_SERVICE_FIXTURE_H_
