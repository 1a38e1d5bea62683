// --page-writes on the real kvsessiond: page files written straight to the
// disk (direct, the default) and through the page cache (buffered) are the
// same files, and a session acknowledged under either comes back exactly
// after a kill -9 and a restart under the other.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "client/kvsession_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/reference_data.h"
#include "tests/scratch_dir.h"
#include "tests/server_process.h"

namespace kvs {
namespace {

namespace v1 = kvsession::v1;
using ::testing::HasSubstr;

constexpr char kModel[] = "tiny-llama-gqa.gguf";
// Several full pages of 16 tokens and a partial one: both kinds of file.
constexpr char kPrompt[] =
    "Once upon a time there was a little robot who lived in a quiet town by the sea. Every morning it walked "
    "along the shore, counting the waves and collecting shells for its friend, an old lighthouse keeper.";

class PageWritesServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(ModelPath())) GTEST_SKIP() << "../shared absent";
  }
  void TearDown() override {
    if (server_ && server_->Running()) server_->Kill();
  }

  static std::string ModelPath() { return SharedDir() + "/models/" + kModel; }
  std::string Data(const std::string& name) const { return scratch_.file(name); }

  void Start(const std::string& page_writes, const std::string& data) {
    server_ = std::make_unique<ServerProcess>();
    ASSERT_TRUE(server_->Start(ModelPath(), data, {"--page-writes", page_writes})) << server_->log();
    client_ = std::make_unique<KvSessionClient>(server_->address());
    ASSERT_TRUE(client_->WaitForServer(std::chrono::seconds(10)));
  }

  absl::StatusOr<std::vector<int32_t>> Greedy(const std::string& id, int n) {
    v1::GenerateRequest req;
    req.set_session_id(id);
    req.set_max_tokens(n);
    req.set_ignore_eos(true);
    req.mutable_sampling()->set_temperature(0);
    absl::StatusOr<GenerateResult> r = client_->Generate(req);
    if (!r.ok()) return r.status();
    return r->ids;
  }

  // A session of kPrompt and its greedy continuation from a fork (the
  // session itself stays at the prompt).
  std::pair<std::string, std::vector<int32_t>> SessionAndContinuation() {
    v1::CreateSessionRequest create;
    create.mutable_input()->set_text(kPrompt);
    absl::StatusOr<v1::Session> s = client_->CreateSession(create);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return {};
    v1::ForkRequest fork;
    fork.set_session_id(s->id());
    fork.set_count(1);
    absl::StatusOr<v1::ForkResponse> forked = client_->Fork(fork);
    EXPECT_TRUE(forked.ok()) << forked.status();
    if (!forked.ok()) return {};
    return {s->id(), Greedy(forked->sessions(0).id(), 12).value_or(std::vector<int32_t>{})};
  }

  // The page files of a data directory: name -> bytes.
  static std::map<std::string, std::string> PageFiles(const std::string& data) {
    std::map<std::string, std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(data + "/pages")) {
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream bytes;
      bytes << in.rdbuf();
      files[e.path().filename().string()] = bytes.str();
    }
    return files;
  }

  ScratchDir scratch_{"page_writes_service_test"};
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<KvSessionClient> client_;
};

TEST_F(PageWritesServiceTest, DirectAndBufferedWritesLeaveTheSameFilesAndEachRestoresUnderTheOther) {
  std::map<std::string, std::map<std::string, std::string>> files;
  for (const std::string writes : {"direct", "buffered"}) {
    const std::string data = Data(writes);
    Start(writes, data);
    const auto [id, continuation] = SessionAndContinuation();
    ASSERT_EQ(continuation.size(), 12u);
    // Acknowledged, then killed: no orderly shutdown writes anything more.
    server_->Kill();
    const std::string other = writes == "direct" ? "buffered" : "direct";
    Start(other, data);
    files[writes] = PageFiles(data);  // what the restart kept (it deletes files no record lists)
    EXPECT_TRUE(client_->RestoreSession(id).ok());
    EXPECT_EQ(Greedy(id, 12).value_or(std::vector<int32_t>{}), continuation) << writes << " then " << other;
    server_->Kill();
  }
  // The same prompt's pages: the same names and, byte for byte, the same
  // files (no padding left by a direct write, and nothing missing).
  EXPECT_GE(files["direct"].size(), 3u);
  for (const auto& [name, bytes] : files["direct"]) EXPECT_THAT(name, testing::EndsWith(".kvpage"));
  EXPECT_EQ(files["direct"], files["buffered"]);
}

TEST_F(PageWritesServiceTest, AnUnknownPageWritesSettingStopsTheServer) {
  ServerProcess server;
  EXPECT_FALSE(server.Start(ModelPath(), Data("unknown"), {"--page-writes", "async"}));
  EXPECT_THAT(server.log(), HasSubstr("--page-writes must be direct or buffered"));
}

}  // namespace
}  // namespace kvs
