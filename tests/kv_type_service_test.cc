// --kv-type q8_0 and bf16 (issue 11's KV capacity): the real kvsessiond
// binary keeps its sessions' KV in that type in RAM and in its page files,
// restores them exactly after a restart, and a server started with another
// KV type answers FAILED_PRECONDITION for them without losing them.
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "client/kvsession_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/attention_amx.h"
#include "tests/reference_data.h"
#include "tests/scratch_dir.h"
#include "tests/server_process.h"

namespace kvs {
namespace {

namespace v1 = kvsession::v1;
using ::testing::HasSubstr;

constexpr char kModel[] = "tiny-llama-gqa.gguf";  // head_dim 64 (a multiple of 32)
constexpr int kPageTokens = 16;

class KvTypeServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(ModelPath(kModel))) GTEST_SKIP() << "../shared absent";
  }
  void TearDown() override { if (server_ && server_->Running()) server_->Kill(); }

  static std::string ModelPath(const std::string& name) { return SharedDir() + "/models/" + name; }
  std::string Data(const std::string& name) const { return (dir_ / name).string(); }

  void Start(const std::string& kv_type, const std::string& data, const std::string& model = kModel,
             const std::vector<std::string>& more_flags = {}) {
    server_ = std::make_unique<ServerProcess>();
    std::vector<std::string> flags = {"--kv-type", kv_type};
    flags.insert(flags.end(), more_flags.begin(), more_flags.end());
    ASSERT_TRUE(server_->Start(ModelPath(model), data, flags)) << server_->log();
    client_ = std::make_unique<KvSessionClient>(server_->address());
    ASSERT_TRUE(client_->WaitForServer(std::chrono::seconds(10)));
  }

  v1::Session Create(const std::string& text) {
    v1::CreateSessionRequest req;
    req.mutable_input()->set_text(text);
    absl::StatusOr<v1::Session> s = client_->CreateSession(req);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::Session();
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

  // The continuation of `s` that a fork of it generates greedily (the
  // original is kept as it is).
  absl::StatusOr<std::vector<int32_t>> ForkAndGreedy(const v1::Session& s, int n) {
    v1::ForkRequest fork;
    fork.set_session_id(s.id());
    fork.set_count(1);
    absl::StatusOr<v1::ForkResponse> forked = client_->Fork(fork);
    if (!forked.ok()) return forked.status();
    return Greedy(forked->sessions(0).id(), n);
  }

  // Sizes of the page files in the data directory's pages/.
  std::vector<uintmax_t> PageFileSizes(const std::string& data) const {
    std::vector<uintmax_t> sizes;
    for (const auto& e : std::filesystem::directory_iterator(data + "/pages")) {
      if (e.path().extension() == ".kvpage") sizes.push_back(e.file_size());
    }
    return sizes;
  }

  ScratchDir scratch_{"kv_type_test"};
  const std::filesystem::path dir_ = scratch_.path();
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<KvSessionClient> client_;
};

// About 45 tokens: two full pages and a partial one.
const char kPrompt[] =
    "Once upon a time, in a land of vectors and pages, a small machine kept every word it heard. "
    "It wrote them down in blocks of sixteen, and it never forgot a single one of them.";

TEST_F(KvTypeServiceTest, AQ8_0ServerStoresPagesOfQ8_0BlocksAndRestoresThemExactly) {
  Start("q8_0", Data("q8"));
  absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->kv_cache().dtype(), "q8_0");
  const v1::ModelInfo& m = info->model();
  ASSERT_EQ(m.head_dim() % 32, 0);
  // A page: every layer's K and V of every KV head, T rows of head_dim / 32
  // blocks of 34 bytes (an F16 scale and 32 int8).
  const int64_t q8_page = int64_t{m.n_layers()} * 2 * m.n_kv_heads() * kPageTokens * (m.head_dim() / 32) * 34;
  EXPECT_EQ(info->kv_cache().page_bytes(), q8_page);

  v1::Session s = Create(kPrompt);
  ASSERT_GE(s.length(), 2 * kPageTokens);
  // Every full page's file: the 48-byte header and the q8_0 payload.
  std::vector<uintmax_t> sizes = PageFileSizes(Data("q8"));
  ASSERT_FALSE(sizes.empty());
  for (uintmax_t size : sizes) EXPECT_LE(size, static_cast<uintmax_t>(48 + q8_page));
  EXPECT_EQ(std::count(sizes.begin(), sizes.end(), static_cast<uintmax_t>(48 + q8_page)),
            s.length() / kPageTokens);

  // The uninterrupted continuation: a fork generates, the original is kept.
  absl::StatusOr<std::vector<int32_t>> uninterrupted = ForkAndGreedy(s, 12);
  ASSERT_TRUE(uninterrupted.ok()) << uninterrupted.status();

  ASSERT_EQ(server_->Stop(), 0);
  Start("q8_0", Data("q8"));
  absl::StatusOr<std::vector<int32_t>> restored = Greedy(s.id(), 12);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(*restored, *uninterrupted);
  absl::StatusOr<v1::ServerInfo> after = client_->GetServerInfo();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->engine().prefill_tokens(), 0) << "the KV came from disk, not from a new prefill";
}

// --amx-attention (kernels/attention_amx.h): where the CPU has AMX-BF16
// the server says so, and its sessions keep the determinism contract
// through the real service: a session prefilled, stored and restored
// continues exactly as its uninterrupted fork did. Elsewhere the flag is
// ignored (the vector kernels run), and the same holds.
TEST_F(KvTypeServiceTest, AnAmxAttentionServerSaysSoAndContinuesItsRestoredSessionsExactly) {
  for (const std::string kv_type : {"q8_0", "bf16"}) {
    const std::string data = Data("amx_" + kv_type);
    Start(kv_type, data, kModel, {"--amx-attention"});
    absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->kernels().find("attention amx") != std::string::npos, AmxAttentionAvailable())
        << info->kernels();
    v1::Session s = Create(kPrompt);
    absl::StatusOr<std::vector<int32_t>> uninterrupted = ForkAndGreedy(s, 12);
    ASSERT_TRUE(uninterrupted.ok()) << uninterrupted.status();
    ASSERT_EQ(server_->Stop(), 0);
    Start(kv_type, data, kModel, {"--amx-attention"});
    absl::StatusOr<std::vector<int32_t>> restored = Greedy(s.id(), 12);
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_EQ(*restored, *uninterrupted) << kv_type;
    ASSERT_EQ(server_->Stop(), 0);
  }
}

TEST_F(KvTypeServiceTest, Q8_0PagesTakeAboutHalfTheBytesOfF16Pages) {
  Start("f16", Data("f16"));
  const int64_t f16_page = client_->GetServerInfo()->kv_cache().page_bytes();
  ASSERT_EQ(server_->Stop(), 0);
  Start("q8_0", Data("q8"));
  const int64_t q8_page = client_->GetServerInfo()->kv_cache().page_bytes();
  EXPECT_EQ(q8_page * 64, f16_page * 34) << "34 bytes per 32 values instead of 64";
}

TEST_F(KvTypeServiceTest, AServerWithAnotherKvTypeSaysFailedPreconditionAndKeepsTheSession) {
  Start("q8_0", Data("q8"));
  v1::Session s = Create(kPrompt);
  absl::StatusOr<std::vector<int32_t>> before = Greedy(s.id(), 4);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(server_->Stop(), 0);

  for (const char* other : {"f16", "bf16"}) {
    Start(other, Data("q8"));
    absl::StatusOr<std::vector<int32_t>> refused = Greedy(s.id(), 4);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << other;
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr("dtype q8_0")) << other;
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr(other));
    EXPECT_TRUE(client_->GetSession(s.id()).ok()) << "still listed";
    v1::Session fresh = Create("Once upon a time");  // the server itself works
    EXPECT_TRUE(Greedy(fresh.id(), 3).ok());
    ASSERT_EQ(server_->Stop(), 0);
  }

  Start("q8_0", Data("q8"));  // nothing was lost
  absl::StatusOr<std::vector<int32_t>> again = Greedy(s.id(), 4);
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST_F(KvTypeServiceTest, ABf16ServerRestoresItsSessionsExactly) {
  Start("bf16", Data("bf16"));
  EXPECT_EQ(client_->GetServerInfo()->kv_cache().dtype(), "bf16");
  v1::Session s = Create(kPrompt);
  absl::StatusOr<std::vector<int32_t>> uninterrupted = ForkAndGreedy(s, 8);
  ASSERT_TRUE(uninterrupted.ok()) << uninterrupted.status();
  ASSERT_EQ(server_->Stop(), 0);
  Start("bf16", Data("bf16"));
  EXPECT_EQ(Greedy(s.id(), 8).value_or(std::vector<int32_t>{}), *uninterrupted);
}

TEST_F(KvTypeServiceTest, Q8_0OnAModelWhoseHeadDimIsNotAMultipleOf32RefusesToStart) {
  ServerProcess server;
  // aidreams260K has head_dim 16.
  EXPECT_FALSE(server.Start(ModelPath("aidreams260K.gguf"), Data("small"), {"--kv-type", "q8_0"}));
  EXPECT_THAT(server.log(), HasSubstr("--kv-type q8_0 needs a head_dim that is a multiple of 32"));
  ServerProcess unknown;
  EXPECT_FALSE(unknown.Start(ModelPath(kModel), Data("unknown"), {"--kv-type", "q4_0"}));
  EXPECT_THAT(unknown.log(), HasSubstr("--kv-type must be f16, bf16, q8_0 or f32"));
}

}  // namespace
}  // namespace kvs
