// Truncate and Fork{at_length} against the real kvsessiond (tiny-llama-gqa,
// pages of 16 tokens): greedy continuations after a cut equal those of a
// fresh session created from the same token ids, cut pages go back to the
// pool, a fork sharing the cut page is unaffected, a truncate survives
// kill -9, and bad requests get their codes.
#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "tests/running_generate.h"
#include "tests/service_fixture.h"
#include "tests/subprocess.h"

namespace kvs {
namespace {

using ::testing::HasSubstr;

// Over 4 pages of tiny-llama-gqa tokens.
constexpr char kPrompt[] =
    "Once upon a time there was a little girl who lived in a village near the forest. "
    "Whenever she went out, the little girl wore a red riding cloak, so everyone in the "
    "village called her Little Red Riding Hood. One morning her mother asked her to take "
    "a basket of bread and butter to her grandmother, who lived on the other side of the wood.";

class RewindTest : public ServiceFixture {
 protected:
  void SetUp() override {
    ServiceFixture::SetUp();
    if (IsSkipped()) return;
    StartServer("tiny-llama-gqa.gguf");
    absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
    ASSERT_TRUE(info.ok());
    bos_ = info->model().bos_token_id();
    ASSERT_EQ(info->kv_cache().page_tokens(), 16);
  }

  std::vector<int32_t> Tokens(const std::string& id) {
    absl::StatusOr<v1::Session> s = client_->GetSession(id, /*include_tokens=*/true);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::vector<int32_t>(s->token_ids().begin(), s->token_ids().end())
                  : std::vector<int32_t>();
  }

  // A new session created from exactly `tokens` (its BOS is the one the
  // server adds).
  std::string Fresh(const std::vector<int32_t>& tokens) {
    v1::CreateSessionRequest req;
    const bool bos = !tokens.empty() && tokens[0] == bos_;
    for (size_t i = bos ? 1 : 0; i < tokens.size(); ++i) req.mutable_input()->mutable_tokens()->add_ids(tokens[i]);
    absl::StatusOr<v1::Session> s = client_->CreateSession(req);
    EXPECT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(Tokens(s->id()), tokens);
    return s.ok() ? s->id() : "";
  }

  std::vector<int32_t> Greedy(const std::string& id, int n) {
    v1::GenerateRequest req;
    req.set_session_id(id);
    req.set_max_tokens(n);
    req.set_ignore_eos(true);
    req.mutable_sampling()->set_temperature(0);
    absl::StatusOr<GenerateResult> r = client_->Generate(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->ids : std::vector<int32_t>();
  }

  v1::TruncateResponse Truncate(const std::string& id, int length) {
    absl::StatusOr<v1::TruncateResponse> r = client_->Truncate(id, length);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::TruncateResponse();
  }

  std::vector<std::string> ForkAt(const std::string& id, int at_length, int count = 1) {
    v1::ForkRequest req;
    req.set_session_id(id);
    req.set_count(count);
    req.set_at_length(at_length);
    absl::StatusOr<v1::ForkResponse> r = client_->Fork(req);
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<std::string> ids;
    if (r.ok()) {
      for (const v1::Session& s : r->sessions()) ids.push_back(s.id());
    }
    return ids;
  }

  int64_t PagesInUse() {
    absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
    EXPECT_TRUE(info.ok());
    return info.ok() ? info->kv_cache().pages_in_use() : -1;
  }

  int32_t bos_ = -1;
};

TEST_F(RewindTest, RegeneratingAfterTruncateGivesTheSameGreedyAnswer) {
  v1::Session s = Create(kPrompt);
  ASSERT_GT(s.length(), 64);
  const std::vector<int32_t> answer = Greedy(s.id(), 24);
  v1::TruncateResponse cut = Truncate(s.id(), s.length());
  EXPECT_EQ(cut.session().length(), s.length());
  EXPECT_EQ(cut.removed_tokens(), 24);
  EXPECT_EQ(Greedy(s.id(), 24), answer);
}

TEST_F(RewindTest, TruncateThenGreedyGenerateEqualsAFreshSessionOfTheSameTokens) {
  v1::Session s = Create(kPrompt);
  Greedy(s.id(), 24);
  // Mid-page cuts and a cut whose KV ends on a page boundary (length 49:
  // KV 48 = 3 pages), each from the longest down.
  for (int length : {s.length() + 11, s.length() - 3, 49, 38}) {
    SCOPED_TRACE(length);
    const std::vector<int32_t> before = Tokens(s.id());
    ASSERT_GE(static_cast<int>(before.size()), length);
    v1::TruncateResponse cut = Truncate(s.id(), length);
    EXPECT_EQ(cut.session().length(), length);
    EXPECT_EQ(cut.session().kv_pages(), (length - 1 + 15) / 16);
    const std::vector<int32_t> kept = Tokens(s.id());
    EXPECT_EQ(kept, std::vector<int32_t>(before.begin(), before.begin() + length));
    const std::string fresh = Fresh(kept);
    EXPECT_EQ(Greedy(s.id(), 20), Greedy(fresh, 20));
  }
}

TEST_F(RewindTest, ForkAtLengthBranchesGenerateLikeAFreshSessionAndLeaveTheSourceAsItWas) {
  v1::Session s = Create(kPrompt);
  Greedy(s.id(), 16);
  const std::vector<int32_t> source = Tokens(s.id());
  for (int at : {38, 49, s.length() + 5}) {
    SCOPED_TRACE(at);
    const int64_t in_use = PagesInUse();
    std::vector<std::string> branches = ForkAt(s.id(), at, 2);
    ASSERT_EQ(branches.size(), 2u);
    EXPECT_EQ(PagesInUse(), in_use) << "a branch copies no page";
    absl::StatusOr<v1::Session> b = client_->GetSession(branches[0]);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->length(), at);
    EXPECT_EQ(b->parent_session_id(), s.id());
    const std::vector<int32_t> kept(source.begin(), source.begin() + at);
    EXPECT_EQ(Tokens(branches[1]), kept);
    const std::vector<int32_t> expected = Greedy(Fresh(kept), 12);
    EXPECT_EQ(Greedy(branches[0], 12), expected);
    EXPECT_EQ(Greedy(branches[1], 12), expected);
    EXPECT_EQ(Tokens(s.id()), source) << "the source keeps every token";
  }
}

TEST_F(RewindTest, TruncateReleasesPagesAndAForkSharingTheCutPageKeepsItsContinuation) {
  // Alone: the pages past the cut go back to the pool.
  v1::Session alone = Create(kPrompt);
  Greedy(alone.id(), 40);  // > 6 pages
  absl::StatusOr<v1::Session> full = client_->GetSession(alone.id());
  ASSERT_TRUE(full.ok());
  const int64_t in_use = PagesInUse();
  v1::TruncateResponse cut = Truncate(alone.id(), 20);  // KV 19: 2 pages
  EXPECT_EQ(cut.session().kv_pages(), 2);
  EXPECT_EQ(PagesInUse(), in_use - (full->kv_pages() - 2));

  // Shared: a fork's continuation is unchanged by the source's cut and its
  // new tokens written where the cut was.
  v1::Session s = Create(kPrompt);
  Greedy(s.id(), 20);
  v1::ForkRequest fork;
  fork.set_session_id(s.id());
  fork.set_count(2);
  absl::StatusOr<v1::ForkResponse> twins = client_->Fork(fork);
  ASSERT_TRUE(twins.ok());
  const std::vector<int32_t> expected = Greedy(twins->sessions(1).id(), 30);
  Truncate(s.id(), 40);  // mid-page
  Greedy(s.id(), 30);
  v1::AppendRequest append;
  append.set_session_id(s.id());
  append.mutable_input()->set_text(" and then something else happened entirely");
  ASSERT_TRUE(client_->Append(append).ok());
  EXPECT_EQ(Greedy(twins->sessions(0).id(), 30), expected);
}

TEST_F(RewindTest, ATruncateSurvivesKillDashNineAndGenerationContinuesAsBefore) {
  v1::Session s = Create(kPrompt);
  Greedy(s.id(), 24);
  Truncate(s.id(), 45);
  // What S generates next, seen through a twin made before the crash.
  v1::ForkRequest fork;
  fork.set_session_id(s.id());
  fork.set_count(1);
  absl::StatusOr<v1::ForkResponse> twin = client_->Fork(fork);
  ASSERT_TRUE(twin.ok());
  const std::vector<int32_t> expected = Greedy(twin->sessions(0).id(), 20);
  const std::vector<int32_t> tokens = Tokens(s.id());

  server_->Kill();
  StartServer("tiny-llama-gqa.gguf");
  absl::StatusOr<v1::Session> back = client_->GetSession(s.id());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->length(), 45);
  EXPECT_EQ(Tokens(s.id()), tokens);
  EXPECT_EQ(Greedy(s.id(), 20), expected);
}

TEST_F(RewindTest, BadTruncatesAndForksGetTheirCodesAndChangeNothing) {
  v1::Session s = Create("Once upon a time");
  const std::vector<int32_t> tokens = Tokens(s.id());
  auto code = [](const auto& r) { return r.status().code(); };
  EXPECT_EQ(code(client_->Truncate("ses_00000000000000000000000000000000", 1)), absl::StatusCode::kNotFound);
  EXPECT_EQ(code(client_->Truncate("ses_nope", 1)), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<v1::TruncateResponse> past = client_->Truncate(s.id(), s.length() + 1);
  EXPECT_EQ(code(past), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(past.status().message()), HasSubstr("past the end"));
  EXPECT_EQ(code(client_->Truncate(s.id(), 0)), absl::StatusCode::kInvalidArgument) << "BOS stays";
  EXPECT_EQ(code(client_->Truncate(s.id(), -5)), absl::StatusCode::kInvalidArgument);
  v1::ForkRequest fork;
  fork.set_session_id(s.id());
  fork.set_count(1);
  fork.set_at_length(s.length() + 1);
  EXPECT_EQ(code(client_->Fork(fork)), absl::StatusCode::kOutOfRange);
  fork.set_at_length(0);
  EXPECT_EQ(code(client_->Fork(fork)), absl::StatusCode::kInvalidArgument);

  // Busy: a running Generate makes Truncate ABORTED, naming it.
  RunningGenerate long_one(*client_, s.id());
  ASSERT_TRUE(long_one.WaitStarted());
  absl::StatusOr<v1::TruncateResponse> busy = client_->Truncate(s.id(), 2);
  EXPECT_EQ(code(busy), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(busy.status().message()), HasSubstr("busy: a Generate is running"));
  long_one.Stop();

  absl::StatusOr<v1::ListSessionsResponse> all = client_->ListSessions(100, "");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->sessions_size(), 1) << "no branch was made";
  // The cancelled Generate's tokens stay, the prefix is untouched.
  const std::vector<int32_t> now = Tokens(s.id());
  EXPECT_EQ(std::vector<int32_t>(now.begin(), now.begin() + tokens.size()), tokens);
}

TEST_F(RewindTest, WithoutBosATruncateToZeroLeavesAnEmptySessionThatAppendRefills) {
  server_->Stop();
  StartServer("tiny-qwen3.gguf");  // its vocabulary adds no BOS
  v1::Session s = Create(kPrompt);
  Greedy(s.id(), 8);
  v1::TruncateResponse cut = Truncate(s.id(), 0);
  EXPECT_EQ(cut.session().length(), 0);
  EXPECT_EQ(cut.session().kv_pages(), 0);
  v1::GenerateRequest req;
  req.set_session_id(s.id());
  req.set_max_tokens(4);
  EXPECT_EQ(client_->Generate(req).status().code(), absl::StatusCode::kFailedPrecondition)
      << "an empty session has nothing to generate from";
  ASSERT_TRUE(client_->Append(s.id(), "The little girl").ok());
  v1::Session fresh = Create("The little girl");
  EXPECT_EQ(Tokens(s.id()), Tokens(fresh.id()));
  EXPECT_EQ(Greedy(s.id(), 12), Greedy(fresh.id(), 12));
}

TEST_F(RewindTest, TheCliTruncatesAndForksFromAnEarlierLength) {
  v1::Session s = Create(kPrompt);
  Greedy(s.id(), 10);
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {BinaryPath("kvsession")});
    args.insert(args.end(), {"--server", server_->address(), "--json"});
    return RunProcess(args, dir_.string());
  };
  ProcessResult cut = cli({"truncate", "--session", s.id(), "--length", "30"});
  ASSERT_EQ(cut.exit_code, 0) << cut.err;
  nlohmann::json j = nlohmann::json::parse(cut.out);
  EXPECT_EQ(j["length"], 30);
  EXPECT_EQ(j["removed_tokens"], s.length() + 10 - 30);
  EXPECT_EQ(client_->GetSession(s.id())->length(), 30);

  ProcessResult fork = cli({"fork", "--session", s.id(), "--count", "1", "--at-length", "12"});
  ASSERT_EQ(fork.exit_code, 0) << fork.err;
  const std::string branch = nlohmann::json::parse(fork.out)["sessions"][0];
  EXPECT_EQ(client_->GetSession(branch)->length(), 12);

  ProcessResult past = cli({"truncate", "--session", s.id(), "--length", "31"});
  EXPECT_EQ(past.exit_code, 1);
  EXPECT_THAT(past.err, HasSubstr("OUT_OF_RANGE"));
  EXPECT_EQ(cli({"truncate", "--session", s.id()}).exit_code, 2) << "--length is required";
}

TEST_F(RewindTest, TheCliRefusesANumberPastAnIntInsteadOfWrappingIt) {
  v1::Session s = Create(kPrompt);
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {BinaryPath("kvsession")});
    args.insert(args.end(), {"--server", server_->address()});
    return RunProcess(args, dir_.string());
  };
  // 2^32 would wrap to 0 in a 32-bit field: a Truncate that empties the session.
  ProcessResult cut = cli({"truncate", "--session", s.id(), "--length", "4294967296"});
  EXPECT_EQ(cut.exit_code, 2);
  EXPECT_THAT(cut.err, HasSubstr("--length expects an integer"));
  EXPECT_EQ(client_->GetSession(s.id())->length(), s.length());
  ProcessResult fork = cli({"fork", "--session", s.id(), "--count", "4294967297"});
  EXPECT_EQ(fork.exit_code, 2) << "would wrap to 1 branch";
  ProcessResult logprobs = cli({"generate", "--session", s.id(), "-n", "2", "--logprobs", "two"});
  EXPECT_EQ(logprobs.exit_code, 2) << "a malformed --logprobs was ignored";
  ProcessResult timeout = cli({"generate", "--session", s.id(), "-n", "2", "--timeout-ms", "1s"});
  EXPECT_EQ(timeout.exit_code, 2) << "a malformed --timeout-ms was ignored";
  EXPECT_EQ(client_->GetSession(s.id())->length(), s.length()) << "nothing ran";
}

}  // namespace
}  // namespace kvs
