// Durability of the service: kill -9 and restart, corrupted pages, a store
// made with another model, graceful shutdown. The real kvsessiond binary, a
// real RocksDB store on disk, real sockets.
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cache/session_store.h"
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

std::string ModelPath(const std::string& name) { return SharedDir() + "/models/" + name; }

class RecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(ModelPath("tiny-llama-gqa.gguf"))) GTEST_SKIP() << "../shared absent";
    data_ = (dir_ / "data").string();
  }
  void TearDown() override { if (server_ && server_->Running()) server_->Kill(); }

  void Start(const std::string& model = "tiny-llama-gqa.gguf") {
    server_ = std::make_unique<ServerProcess>();
    ASSERT_TRUE(server_->Start(ModelPath(model), data_)) << server_->log();
    client_ = std::make_unique<KvSessionClient>(server_->address());
    ASSERT_TRUE(client_->WaitForServer(std::chrono::seconds(10)));
  }

  v1::Session Create(const std::string& text, uint64_t seed = 7) {
    v1::CreateSessionRequest req;
    req.mutable_input()->set_text(text);
    req.mutable_sampling()->set_seed(seed);
    absl::StatusOr<v1::Session> s = client_->CreateSession(req);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::Session();
  }

  // Greedy when temperature is 0; otherwise the session's own random stream.
  std::vector<int32_t> Generate(const std::string& id, int n, float temperature) {
    v1::GenerateRequest req;
    req.set_session_id(id);
    req.set_max_tokens(n);
    req.set_ignore_eos(true);
    req.mutable_sampling()->set_temperature(temperature);
    absl::StatusOr<GenerateResult> r = client_->Generate(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->ids : std::vector<int32_t>();
  }

  ScratchDir scratch_{"recovery_test"};
  const std::filesystem::path dir_ = scratch_.path();
  std::string data_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<KvSessionClient> client_;
};

TEST_F(RecoveryTest, KillNineLosesNothingAcknowledgedAndContinuesExactly) {
  Start();
  // Twins: X is interrupted by the crash, Y (same prompt, same seed, same
  // calls) runs uninterrupted and shows what X must produce.
  const std::string prompt = "Line one\nLine two\n\\tIndented line three";
  v1::Session x = Create(prompt, 1234), y = Create(prompt, 1234);
  v1::Session greedy = Create("The quick brown fox jumps over the lazy dog.");
  for (const auto& id : {x.id(), y.id()}) Generate(id, 37, 0.9f);
  Generate(greedy.id(), 21, 0.0f);
  v1::ForkRequest fork;
  fork.set_session_id(greedy.id());
  fork.set_count(2);
  fork.add_seeds(5);
  fork.add_seeds(6);
  absl::StatusOr<v1::ForkResponse> branches = client_->Fork(fork);
  ASSERT_TRUE(branches.ok());
  Generate(branches->sessions(0).id(), 9, 1.0f);
  absl::StatusOr<v1::Checkpoint> ckpt = client_->Snapshot(greedy.id(), "before-crash");
  ASSERT_TRUE(ckpt.ok());

  // What the uninterrupted server produces next.
  const std::vector<int32_t> y_next = Generate(y.id(), 40, 0.9f);
  const std::vector<int32_t> greedy_next_expected = [&] {
    v1::Session twin = Create("The quick brown fox jumps over the lazy dog.");
    Generate(twin.id(), 21, 0.0f);
    return Generate(twin.id(), 30, 0.0f);
  }();
  absl::StatusOr<std::vector<v1::Session>> acknowledged = client_->ListAllSessions();
  ASSERT_TRUE(acknowledged.ok());

  // A long generation is running when the process is killed.
  std::thread doomed([&] {
    v1::GenerateRequest req;
    req.set_session_id(y.id());
    req.set_max_tokens(1500);
    req.set_ignore_eos(true);
    (void)client_->Generate(req);  // unacknowledged: the crash interrupts it
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server_->Kill();
  doomed.join();

  Start();
  absl::StatusOr<std::vector<v1::Session>> listed = client_->ListAllSessions();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), acknowledged->size());
  for (const v1::Session& before : *acknowledged) {
    absl::StatusOr<v1::Session> now = client_->GetSession(before.id());
    ASSERT_TRUE(now.ok()) << before.id();
    if (before.id() != y.id()) {
      EXPECT_EQ(now->length(), before.length()) << before.id();
    }
    EXPECT_FALSE(now->resident()) << "KV comes back from disk on first use";
  }
  // X continues exactly as Y did without the crash (same seed, same stream).
  EXPECT_EQ(Generate(x.id(), 40, 0.9f), y_next);
  EXPECT_EQ(Generate(greedy.id(), 30, 0.0f), greedy_next_expected);
  EXPECT_EQ(Generate(branches->sessions(1).id(), 5, 1.0f).size(), 5u);
  absl::StatusOr<v1::Session> from_ckpt = client_->RestoreCheckpoint(ckpt->id());
  ASSERT_TRUE(from_ckpt.ok()) << from_ckpt.status();
  EXPECT_EQ(Generate(from_ckpt->id(), 30, 0.0f), greedy_next_expected);
}

TEST_F(RecoveryTest, KvComesBackFromDiskWithoutRePrefill) {
  Start();
  std::string prompt;
  for (int i = 0; i < 20; ++i) prompt += "An up it for you by. Then not many. ";
  v1::Session s = Create(prompt);
  ASSERT_EQ(server_->Stop(), 0);
  Start();
  v1::GenerateRequest req;
  req.set_session_id(s.id());
  req.set_max_tokens(4);
  absl::StatusOr<GenerateResult> r = client_->Generate(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->usage.prompt_tokens(), 0);
  // The KV came from disk: the restarted engine ran no prefill at all, only
  // the decode steps of the 4 new tokens.
  absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->engine().prefill_tokens(), 0);
  EXPECT_EQ(info->engine().decode_tokens(), 4);
  absl::StatusOr<v1::Session> now = client_->GetSession(s.id());
  EXPECT_TRUE(now->resident());
  EXPECT_EQ(now->kv_pages(), (now->length() - 1 + 15) / 16);
}

TEST_F(RecoveryTest, CorruptPageIsDataLossForThatSessionOnly) {
  Start();
  v1::Session victim = Create("Once upon a time, in a land of vectors, a machine dreamed.");
  v1::Session bystander = Create("The quick brown fox jumps over the lazy dog.");
  Generate(victim.id(), 10, 0.0f);
  const std::vector<int32_t> bystander_next = [&] {
    v1::Session twin = Create("The quick brown fox jumps over the lazy dog.");
    return Generate(twin.id(), 10, 0.0f);
  }();
  ASSERT_EQ(server_->Stop(), 0);

  // Flip one byte of a page only the victim references.
  std::string victim_page;
  {
    absl::StatusOr<std::unique_ptr<SessionStore>> store = SessionStore::Open(data_, StoreOptions());
    ASSERT_TRUE(store.ok()) << store.status();
    std::vector<SessionRecord> sessions;
    std::vector<CheckpointRecord> checkpoints;
    ASSERT_TRUE((*store)->LoadAll(&sessions, &checkpoints).ok());
    std::set<std::string> others;
    for (const auto& r : sessions) {
      if (r.id() != victim.id()) others.insert(r.page_hashes().begin(), r.page_hashes().end());
    }
    for (const auto& r : sessions) {
      if (r.id() != victim.id()) continue;
      for (const std::string& h : r.page_hashes()) {
        if (!others.count(h)) victim_page = h;
      }
    }
  }
  ASSERT_FALSE(victim_page.empty());
  {
    // Bit rot in the page's file, near its end (the payload).
    const std::string path =
        absl::StrCat(data_, "/pages/", PageHash::FromBytes(victim_page)->hex(), ".kvpage");
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << path;
    f.seekg(-3, std::ios::end);
    const char c = static_cast<char>(f.get());
    f.seekp(-3, std::ios::end);
    f.put(static_cast<char>(c ^ 0x40));
  }

  Start();
  v1::GenerateRequest req;
  req.set_session_id(victim.id());
  req.set_max_tokens(3);
  absl::StatusOr<GenerateResult> bad = client_->Generate(req);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss) << bad.status();
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("corrupt"));
  EXPECT_EQ(client_->RestoreSession(victim.id()).status().code(), absl::StatusCode::kDataLoss);
  // Everything else is unaffected.
  EXPECT_EQ(Generate(bystander.id(), 10, 0.0f), bystander_next);
  v1::Session fresh = Create("Once upon a time, in a land of vectors, a machine dreamed.");
  EXPECT_EQ(Generate(fresh.id(), 3, 0.0f).size(), 3u);
  EXPECT_TRUE(client_->GetSession(victim.id()).ok()) << "its metadata is still listed";
}

TEST_F(RecoveryTest, StoreMadeWithAnotherModelIsFailedPrecondition) {
  Start("tiny-llama-gqa.gguf");
  v1::Session old = Create("Once upon a time");
  ASSERT_EQ(server_->Stop(), 0);
  Start("tiny-llama-q4_0.gguf");  // same shapes and vocabulary, other weights
  v1::GenerateRequest req;
  req.set_session_id(old.id());
  req.set_max_tokens(3);
  absl::StatusOr<GenerateResult> r = client_->Generate(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("another model"));
  EXPECT_TRUE(client_->GetSession(old.id()).ok());
  v1::Session now = Create("Once upon a time");
  EXPECT_EQ(Generate(now.id(), 3, 0.0f).size(), 3u);
}

TEST_F(RecoveryTest, SigtermCancelsStreamsPersistsAndExitsZero) {
  Start();
  v1::Session s = Create("Once upon a time");
  std::atomic<int> received{0};
  absl::Status stream_status;
  std::thread stream([&] {
    v1::GenerateRequest req;
    req.set_session_id(s.id());
    req.set_max_tokens(1800);
    req.set_ignore_eos(true);
    GenerateResult partial;
    absl::StatusOr<GenerateResult> r = client_->Generate(
        req, [&](const v1::GenerateResponse& m) {
          received += m.token_ids_size();
          return true;
        },
        std::nullopt, &partial);
    stream_status = r.status();
  });
  while (received < 5) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(server_->Stop(), 0) << server_->log();
  stream.join();
  EXPECT_FALSE(stream_status.ok());
  Start();
  absl::StatusOr<v1::Session> after = client_->GetSession(s.id());
  ASSERT_TRUE(after.ok());
  EXPECT_GE(after->length(), s.length() + received.load()) << "the tokens streamed were kept";
  EXPECT_EQ(Generate(s.id(), 3, 0.0f).size(), 3u);
}

}  // namespace
}  // namespace kvs
