// --page-writes on the real kvsessiond: page files written straight to the
// disk (direct, the default) and through the page cache (buffered) are the
// same files, and a session acknowledged under either comes back exactly
// after a kill -9 and a restart under the other.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service_fixture.h"

namespace kvs {
namespace {

using ::testing::HasSubstr;

constexpr char kModel[] = "tiny-llama-gqa.gguf";
// Several full pages of 16 tokens and a partial one: both kinds of file.
constexpr char kPrompt[] =
    "Once upon a time there was a little robot who lived in a quiet town by the sea. Every morning it walked "
    "along the shore, counting the waves and collecting shells for its friend, an old lighthouse keeper.";

class PageWritesServiceTest : public ServiceFixture {
 protected:
  std::string Data() const { return (dir_ / "data").string(); }

  // A session of kPrompt and its greedy continuation from a fork (the
  // session itself stays at the prompt).
  std::pair<std::string, std::vector<int32_t>> SessionAndContinuation() {
    const v1::Session s = Create(kPrompt);
    v1::ForkRequest fork;
    fork.set_session_id(s.id());
    fork.set_count(1);
    absl::StatusOr<v1::ForkResponse> forked = client_->Fork(fork);
    EXPECT_TRUE(forked.ok()) << forked.status();
    if (!forked.ok()) return {};
    return {s.id(), Generate(forked->sessions(0).id(), 12).ids};
  }

  // The page files of the data directory: name -> bytes.
  std::map<std::string, std::string> PageFiles() const {
    std::map<std::string, std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(Data() + "/pages")) {
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream bytes;
      bytes << in.rdbuf();
      files[e.path().filename().string()] = bytes.str();
    }
    return files;
  }
};

TEST_F(PageWritesServiceTest, DirectAndBufferedWritesLeaveTheSameFilesAndEachRestoresUnderTheOther) {
  std::map<std::string, std::map<std::string, std::string>> files;
  for (const std::string writes : {"direct", "buffered"}) {
    std::filesystem::remove_all(Data());  // each setting its own store
    StartServer(kModel, {"--page-writes", writes});
    const auto [id, continuation] = SessionAndContinuation();
    ASSERT_EQ(continuation.size(), 12u);
    // Acknowledged, then killed: no orderly shutdown writes anything more.
    server_->Kill();
    const std::string other = writes == "direct" ? "buffered" : "direct";
    StartServer(kModel, {"--page-writes", other});
    files[writes] = PageFiles();  // what the restart kept (it deletes files no record lists)
    EXPECT_TRUE(client_->RestoreSession(id).ok());
    EXPECT_EQ(Generate(id, 12).ids, continuation) << writes << " then " << other;
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
  EXPECT_FALSE(server.Start(ModelPath(kModel), Data(), {"--page-writes", "async"}));
  EXPECT_THAT(server.log(), HasSubstr("--page-writes must be direct or buffered"));
}

}  // namespace
}  // namespace kvs
