// Context overflow over the real kvsessiond (aidreams260K: a 128-token
// context, 16-token KV pages): SLIDE sessions generate past the context
// with bounded KV, survive kill -9, fork with shared pages and never feed
// their slid pages to fresh prompts; ERROR sessions behave as before.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "client/migration.h"
#include "nlohmann/json.hpp"
#include "tests/service_fixture.h"
#include "tests/subprocess.h"

namespace kvs {
namespace {

constexpr int kContext = 128;
constexpr int kPageTokens = 16;
constexpr int kMaxPages = kContext / kPageTokens + 1;  // the context and a page being written

class SlideTest : public ServiceFixture {
 protected:
  v1::Session CreateSliding(const std::string& text, std::optional<int> keep_tokens = std::nullopt) {
    v1::CreateSessionRequest req;
    req.mutable_input()->set_text(text);
    req.mutable_sampling()->set_temperature(0);
    req.set_context_policy(v1::CONTEXT_POLICY_SLIDE);
    if (keep_tokens) req.set_keep_tokens(*keep_tokens);
    absl::StatusOr<v1::Session> s = client_->CreateSession(req);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::Session();
  }
  // Greedy, past end-of-generation tokens.
  GenerateResult Run(const std::string& id, int n,
                     std::optional<v1::ContextPolicy> policy = std::nullopt) {
    v1::GenerateRequest req;
    req.set_session_id(id);
    req.set_max_tokens(n);
    req.set_ignore_eos(true);
    req.mutable_sampling()->set_temperature(0);
    if (policy) req.set_context_policy(*policy);
    absl::StatusOr<GenerateResult> r = client_->Generate(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : GenerateResult();
  }
  // One branch of `id` (its first `at_length` tokens when given).
  std::string ForkOne(const std::string& id, std::optional<int> at_length = std::nullopt) {
    v1::ForkRequest fork;
    fork.set_session_id(id);
    fork.set_count(1);
    if (at_length) fork.set_at_length(*at_length);
    absl::StatusOr<v1::ForkResponse> r = client_->Fork(fork);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->sessions(0).id() : "";
  }
  v1::Session Get(const std::string& id, bool tokens = false) {
    absl::StatusOr<v1::Session> s = client_->GetSession(id, tokens);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::Session();
  }
};

TEST_F(SlideTest, ASlideSessionGeneratesThreeTimesTheContextWithBoundedKvPages) {
  StartServer("aidreams260K.gguf");
  const v1::Session s = CreateSliding("Once upon a time, there was a little girl");
  EXPECT_EQ(s.context_policy(), v1::CONTEXT_POLICY_SLIDE);
  EXPECT_EQ(s.keep_tokens(), s.length());  // unset: the initial tokens
  int length = s.length(), generated = 0, dropped = 0, most_pages = 0;
  while (generated < 3 * kContext) {
    const GenerateResult r = Run(s.id(), 64);
    ASSERT_EQ(r.finish_reason, v1::FINISH_REASON_LENGTH) << r.error_message;
    ASSERT_EQ(r.usage.generated_tokens(), 64);
    generated += 64;
    dropped += r.usage.tokens_dropped();
    EXPECT_EQ(r.usage.tokens_dropped() % kPageTokens, 0);
    EXPECT_EQ(r.usage.session_tokens(), length + 64 - r.usage.tokens_dropped());
    length = r.usage.session_tokens();
    const v1::Session now = Get(s.id());
    EXPECT_EQ(now.length(), length);
    EXPECT_LE(now.length(), kContext + 1);
    EXPECT_LE(now.kv_pages(), kMaxPages);
    most_pages = std::max(most_pages, now.kv_pages());
  }
  EXPECT_GE(dropped, 2 * kContext);
  std::printf("generated %d tokens (context %d): %d dropped, at most %d KV pages, final length %d\n",
              generated, kContext, dropped, most_pages, length);
  // The kept prefix is still the session's start.
  const v1::Session now = Get(s.id(), true);
  const v1::Session fresh = Get(CreateSliding("Once upon a time, there was a little girl").id(), true);
  for (int i = 0; i < s.keep_tokens(); ++i) EXPECT_EQ(now.token_ids(i), fresh.token_ids(i)) << i;
}

TEST_F(SlideTest, ASlidSessionSurvivesKill9AndContinuesAsItWouldHave) {
  StartServer("aidreams260K.gguf");
  const v1::Session a = CreateSliding("The little dog ran to the park", 4);
  EXPECT_EQ(a.keep_tokens(), 4);
  ASSERT_GT(Run(a.id(), 200).usage.tokens_dropped(), 0);
  // A twin continues without the crash.
  const std::string twin = ForkOne(a.id());
  ASSERT_FALSE(twin.empty());
  const GenerateResult expected = Run(twin, 100);
  ASSERT_GT(expected.usage.tokens_dropped(), 0);
  const v1::Session before = Get(a.id());

  server_->Kill();
  StartServer("aidreams260K.gguf");
  const v1::Session after = Get(a.id());
  EXPECT_EQ(after.length(), before.length());
  EXPECT_EQ(after.context_policy(), v1::CONTEXT_POLICY_SLIDE);
  EXPECT_EQ(after.keep_tokens(), 4);
  const GenerateResult got = Run(a.id(), 100);
  EXPECT_EQ(got.ids, expected.ids);
  EXPECT_EQ(got.usage.tokens_dropped(), expected.usage.tokens_dropped());
  EXPECT_EQ(got.usage.session_tokens(), expected.usage.session_tokens());
}

// After a restart a slid session's page hash chain is rebuilt from its
// record; it must still hold the slide's salt, which lies among its stored
// pages: a cut into the salted pages then chains from it, and what follows
// persists, exactly as for a twin cut without the restart.
TEST_F(SlideTest, ASlidSessionCutAfterARestartPersistsAndContinuesAsItsTwinCutBefore) {
  StartServer("aidreams260K.gguf");
  const v1::Session a = CreateSliding("The little dog ran to the park", 4);
  ASSERT_GT(Run(a.id(), 200).usage.tokens_dropped(), 0);
  const std::string twin = ForkOne(a.id());
  ASSERT_FALSE(twin.empty());
  constexpr int kCut = kPageTokens + 5;  // inside the first salted page
  ASSERT_TRUE(client_->Truncate(twin, kCut).ok());
  const GenerateResult expected = Run(twin, 20);

  server_->Kill();
  StartServer("aidreams260K.gguf");
  absl::StatusOr<v1::TruncateResponse> cut = client_->Truncate(a.id(), kCut);
  ASSERT_TRUE(cut.ok()) << cut.status();
  const GenerateResult got = Run(a.id(), 20);
  EXPECT_EQ(got.ids, expected.ids);
  server_->Kill();
  StartServer("aidreams260K.gguf");
  EXPECT_EQ(Get(a.id()).length(), kCut + 20);
  EXPECT_EQ(Run(a.id(), 4).ids.size(), 4u);
}

// A cut inside a slid session's salted pages, then the source's own next
// tokens appended: the same tokens as the source's page, but rows computed
// after the slide where the source's were computed before it and moved.
// The page hashes must tell the two KVs apart (else the store and the
// prefix cache would hand one session the other's KV); the kept page
// before the salt is still shared.
TEST_F(SlideTest, ACutIntoTheSaltedPagesNeverSharesAPageHashWithTheSourceFromTheSaltOn) {
  StartServer("aidreams260K.gguf");
  const v1::Session a = CreateSliding("The little dog ran to the park", 4);  // salt at page 1
  ASSERT_GT(Run(a.id(), 200).usage.tokens_dropped(), 0);
  const v1::Session source = Get(a.id(), true);
  ASSERT_GT(source.token_ids_size(), 2 * kPageTokens + 1);
  constexpr int kCut = kPageTokens + 4;
  const std::string b = ForkOne(a.id(), kCut);
  ASSERT_FALSE(b.empty());
  v1::AppendRequest append;
  append.set_session_id(b);
  for (int i = kCut; i <= 2 * kPageTokens; ++i) append.mutable_input()->mutable_tokens()->add_ids(source.token_ids(i));
  ASSERT_TRUE(client_->Append(append).ok());
  auto hashes = [&](const std::string& id) {
    v1::ExportSessionRequest req;
    req.set_session_id(id);
    req.set_page_hashes_only(true);
    absl::StatusOr<ExportedSession> e = ExportSession(*client_, req);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? std::vector<std::string>(e->first.page_hashes().begin(), e->first.page_hashes().end())
                  : std::vector<std::string>();
  };
  const std::vector<std::string> of_a = hashes(a.id()), of_b = hashes(b);
  ASSERT_GE(of_a.size(), 2u);
  ASSERT_EQ(of_b.size(), 2u);  // 2 x 16 tokens of KV
  EXPECT_EQ(of_b[0], of_a[0]);  // the kept page
  EXPECT_NE(of_b[1], of_a[1]);
}

TEST_F(SlideTest, AForkOfASlidSessionSharesItsPages) {
  StartServer("aidreams260K.gguf");
  const v1::Session a = CreateSliding("A big red ball");
  ASSERT_GT(Run(a.id(), 150).usage.tokens_dropped(), 0);
  v1::ForkRequest fork;
  fork.set_session_id(a.id());
  fork.set_count(2);
  absl::StatusOr<v1::ForkResponse> forks = client_->Fork(fork);
  ASSERT_TRUE(forks.ok()) << forks.status();
  const v1::Session source = Get(a.id());
  for (const v1::Session& f : forks->sessions()) {
    EXPECT_EQ(f.context_policy(), v1::CONTEXT_POLICY_SLIDE);
    EXPECT_EQ(f.kv_pages(), source.kv_pages());
    EXPECT_EQ(f.kv_pages_shared(), f.kv_pages());
  }
  // Both branches go on sliding; the source is unchanged by them.
  const GenerateResult b0 = Run(forks->sessions(0).id(), 100);
  const GenerateResult b1 = Run(forks->sessions(1).id(), 100);
  EXPECT_EQ(b0.ids, b1.ids);  // greedy from the same state
  EXPECT_EQ(Get(a.id()).length(), source.length());
  EXPECT_EQ(Run(a.id(), 100).ids, b0.ids);
}

TEST_F(SlideTest, SlidPagesAreNeverReusedForAFreshPrompt) {
  StartServer("aidreams260K.gguf");
  const v1::Session a = CreateSliding("One day a cat", 4);
  ASSERT_GT(Run(a.id(), 150).usage.tokens_dropped(), 0);
  const v1::Session slid = Get(a.id(), true);
  // A fresh session given the slid session's tokens computes them itself,
  // but for the kept page (the same tokens at the same positions).
  v1::CreateSessionRequest create;
  create.mutable_sampling()->set_temperature(0);
  absl::StatusOr<v1::Session> fresh = client_->CreateSession(create);
  ASSERT_TRUE(fresh.ok());
  v1::AppendRequest append;
  append.set_session_id(fresh->id());
  for (int i = fresh->length(); i < slid.token_ids_size(); ++i) {
    append.mutable_input()->mutable_tokens()->add_ids(slid.token_ids(i));
  }
  absl::StatusOr<v1::AppendResponse> response = client_->Append(append);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->usage().cached_tokens(), kPageTokens);
}

TEST_F(SlideTest, TheErrorPolicyStillStopsAtTheContext) {
  StartServer("aidreams260K.gguf");
  const v1::Session e = Create("Once upon a time", std::nullopt, 0.0f);
  EXPECT_EQ(e.context_policy(), v1::CONTEXT_POLICY_ERROR);
  const GenerateResult r = Run(e.id(), 500);
  EXPECT_EQ(r.finish_reason, v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(r.usage.session_tokens(), kContext);
  EXPECT_EQ(r.usage.tokens_dropped(), 0);
  v1::GenerateRequest again;
  again.set_session_id(e.id());
  again.set_max_tokens(5);
  absl::StatusOr<GenerateResult> refused = client_->Generate(again);
  const absl::Status code = refused.ok() ? absl::OkStatus() : refused.status();
  EXPECT_EQ(code.code(), absl::StatusCode::kOutOfRange) << code;
  // This call only, SLIDE goes on (keep_tokens: its initial tokens).
  const GenerateResult slid = Run(e.id(), 40, v1::CONTEXT_POLICY_SLIDE);
  EXPECT_EQ(slid.usage.generated_tokens(), 40);
  EXPECT_GT(slid.usage.tokens_dropped(), 0);
  EXPECT_EQ(Get(e.id()).context_policy(), v1::CONTEXT_POLICY_ERROR);
}

TEST_F(SlideTest, KeepTokensThatLeaveNothingToDropAreInvalid) {
  StartServer("aidreams260K.gguf");
  v1::CreateSessionRequest req;
  req.set_context_policy(v1::CONTEXT_POLICY_SLIDE);
  req.set_keep_tokens(kContext - kPageTokens + 1);  // 8 pages kept of 8
  absl::StatusOr<v1::Session> s = client_->CreateSession(req);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  req.set_keep_tokens(-1);
  EXPECT_EQ(client_->CreateSession(req).status().code(), absl::StatusCode::kInvalidArgument);
  req.set_keep_tokens(kContext - kPageTokens);  // one page left to drop
  EXPECT_TRUE(client_->CreateSession(req).ok());
}

TEST_F(SlideTest, InputLongerThanTheContextSlidesWhileItIsPrefilled) {
  StartServer("aidreams260K.gguf");
  std::string text;
  for (int i = 0; i < 40; ++i) text += " The cat sat on the mat.";
  const v1::Session s = CreateSliding("Once upon a time");
  absl::StatusOr<v1::AppendResponse> appended = client_->Append(s.id(), text);
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_GT(appended->usage().prompt_tokens(), 2 * kContext);
  EXPECT_GT(appended->usage().tokens_dropped(), kContext);
  EXPECT_LE(appended->session().length(), kContext + 1);
  EXPECT_EQ(appended->usage().session_tokens(),
            s.length() + appended->usage().prompt_tokens() - appended->usage().tokens_dropped());
  EXPECT_EQ(Run(s.id(), 10).usage.generated_tokens(), 10);
  // The same input is OUT_OF_RANGE for an ERROR session.
  const v1::Session e = Create("Once upon a time", std::nullopt, 0.0f);
  EXPECT_EQ(client_->Append(e.id(), text).status().code(), absl::StatusCode::kOutOfRange);
}

TEST_F(SlideTest, TheCliCreatesASlideSessionAndReportsDroppedTokens) {
  StartServer("aidreams260K.gguf");
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {BinaryPath("kvsession")});
    args.insert(args.end(), {"--server", server_->address(), "--json"});
    ProcessResult r = RunProcess(args, dir_.string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
  };
  const nlohmann::json created =
      cli({"create", "--text", "Once upon a time", "--context", "slide", "--keep-tokens", "4"});
  const std::string id = created["session"];
  const nlohmann::json generated =
      cli({"generate", "--session", id, "-n", "300", "--temp", "0", "--ignore-eos"});
  EXPECT_EQ(generated["usage"]["generated_tokens"], 300);
  EXPECT_GT(generated["usage"]["tokens_dropped"].get<int>(), 0);
  EXPECT_EQ(Get(id).keep_tokens(), 4);
  ProcessResult bad = RunProcess({BinaryPath("kvsession"), "create", "--context", "shift", "--server",
                                  server_->address()},
                                 dir_.string());
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--context must be error or slide"), std::string::npos) << bad.err;
}

TEST_F(SlideTest, ACheckpointOfASlidSessionRestoresAndContinuesLikeIt) {
  StartServer("aidreams260K.gguf");
  const v1::Session a = CreateSliding("The sun was warm", 4);
  ASSERT_GT(Run(a.id(), 170).usage.tokens_dropped(), 0);
  absl::StatusOr<v1::Checkpoint> ckpt = client_->Snapshot(a.id());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  absl::StatusOr<v1::Session> restored = client_->RestoreCheckpoint(ckpt->id());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->context_policy(), v1::CONTEXT_POLICY_SLIDE);
  EXPECT_EQ(restored->length(), Get(a.id()).length());
  const GenerateResult from_source = Run(a.id(), 90);
  EXPECT_GT(from_source.usage.tokens_dropped(), 0);
  EXPECT_EQ(Run(restored->id(), 90).ids, from_source.ids);
}

TEST_F(SlideTest, ASessionStoredUnderALargerContextSlidesDownToTheNewOne) {
  StartServer("aidreams260K.gguf");
  const v1::Session a = CreateSliding("A bird sang", 4);
  Run(a.id(), 200);
  ASSERT_GT(Get(a.id()).length(), 64);
  server_->Stop();
  StartServer("aidreams260K.gguf", {"--max-context", "64"});
  const GenerateResult r = Run(a.id(), 30);
  EXPECT_EQ(r.usage.generated_tokens(), 30);
  EXPECT_LE(r.usage.session_tokens(), 64 + 1);
  EXPECT_LE(Get(a.id()).kv_pages(), 64 / kPageTokens + 1);
}

}  // namespace
}  // namespace kvs
