// Chat sessions with context_policy SLIDE over the real kvsessiond: a
// conversation runs many turns past a small context (--max-context 128,
// 16-token pages) and every slide drops whole turns, so the session always
// holds its conversation start (the system turn it was created with) and
// whole turns whose markup is intact; usage.tokens_dropped reports the
// drops; kill -9 and restart continue exactly. The model is a small random
// qwen3 model with the real Qwen3 vocabulary and chat template
// (tools/model_synth.h), written once per run.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/qwen3_chat_model.h"
#include "tests/service_fixture.h"
#include "tests/subprocess.h"

namespace kvs {
namespace {

constexpr int kContext = 128;
constexpr int32_t kImStart = kQwen3ImStart;
constexpr int32_t kImEnd = kQwen3ImEnd;
constexpr int32_t kEndOfText = kQwen3EndOfText;
const char kSystemTurn[] = "<|im_start|>system\nAnswer briefly.<|im_end|>\n";

// Replies never end by themselves nor write a turn marker: each is cut by
// max_tokens and closed by the next user message.
const std::map<int32_t, float> kNoMarkers = {{kImStart, -100}, {kImEnd, -100}, {kEndOfText, -100}};

// Each starts with its number: no two rounds' turns begin alike.
std::string Question(int i) {
  std::string q = std::to_string(i) + ". What does a KV cache hold";
  for (int k = 0; k < i % 4; ++k) q += ", and why";
  return q + "?";
}

class ChatSlideTest : public Qwen3ChatFixture {
 protected:
  void SetUp() override {
    Qwen3ChatFixture::SetUp();
    if (IsSkipped()) return;
    StartSlideServer();
  }

  void StartSlideServer() {
    StartServer(model_path_, {"--kv-cache-mb", "64", "--max-context", std::to_string(kContext)});
  }

  // A chat (SLIDE unless told) created with a system message (kept:
  // keep_tokens unset).
  v1::Session CreateChat(const std::string& system = "Answer briefly.",
                         v1::ContextPolicy policy = v1::CONTEXT_POLICY_SLIDE) {
    v1::CreateSessionRequest req;
    v1::ChatMessage* m = req.mutable_input()->mutable_messages()->add_messages();
    m->set_role("system");
    m->set_content(system);
    req.mutable_sampling()->set_temperature(0);
    req.set_context_policy(policy);
    absl::StatusOr<v1::Session> s = client_->CreateSession(req);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::Session();
  }

  // One round: the user's question i, a `reply`-token reply.
  GenerateResult Turn(const std::string& session, int i, int reply = 12) {
    return Ask(session, Question(i), reply);
  }

  // One round with the user's `question`; `policy` overrides the session's
  // for this call.
  GenerateResult Ask(const std::string& session, const std::string& question, int reply,
                     std::optional<v1::ContextPolicy> policy = std::nullopt) {
    v1::GenerateRequest req;
    req.set_session_id(session);
    if (policy) req.set_context_policy(*policy);
    req.set_max_tokens(reply);
    req.mutable_sampling()->set_temperature(0);
    for (const auto& [id, b] : kNoMarkers) (*req.mutable_sampling()->mutable_logit_bias())[id] = b;
    v1::ChatMessage* m = req.mutable_input()->mutable_messages()->add_messages();
    m->set_role("user");
    m->set_content(question);
    absl::StatusOr<GenerateResult> r = client_->Generate(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : GenerateResult();
  }

  std::vector<int32_t> Tokens(const std::string& session) {
    absl::StatusOr<v1::Session> s = client_->GetSession(session, /*include_tokens=*/true);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::vector<int32_t>(s->token_ids().begin(), s->token_ids().end())
                  : std::vector<int32_t>();
  }

  std::string Text(const std::vector<int32_t>& ids) {
    v1::DetokenizeRequest d;
    for (int32_t id : ids) d.add_token_ids(id);
    d.set_include_special(true);
    grpc::ClientContext ctx;
    v1::DetokenizeResponse resp;
    const grpc::Status st = client_->stub()->Detokenize(&ctx, d, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.text();
  }

  // Round 1 (`question`, or Question(1)) with a reply of the length that
  // puts a forced <|im_end|> at the context's last position (kContext - 1),
  // then that token; `tokens`: the session's after it.
  void ReplyEndingAtTheLastPosition(const v1::Session& chat, std::vector<int32_t>* tokens,
                                    const std::string& question = Question(1)) {
    // The user's turn and the generation prompt, counted first.
    v1::TokenizeRequest count;
    count.set_session_id(chat.id());
    count.set_add_generation_prompt(true);
    v1::ChatMessage* m = count.mutable_input()->mutable_messages()->add_messages();
    m->set_role("user");
    m->set_content(question);
    grpc::ClientContext ctx;
    v1::TokenizeResponse counted;
    ASSERT_TRUE(client_->stub()->Tokenize(&ctx, count, &counted).ok());
    const int reply = kContext - 1 - chat.length() - counted.token_ids_size();
    ASSERT_GT(reply, 0);
    const GenerateResult first = Ask(chat.id(), question, reply);
    ASSERT_EQ(first.usage.session_tokens(), kContext - 1);
    ASSERT_EQ(first.usage.tokens_dropped(), 0);
    // The reply goes on by one token, forced to be the end of the turn.
    v1::GenerateRequest end;
    end.set_session_id(chat.id());
    end.set_max_tokens(1);
    end.mutable_sampling()->set_temperature(0);
    (*end.mutable_sampling()->mutable_logit_bias())[kImEnd] = 100;
    absl::StatusOr<GenerateResult> r = client_->Generate(end);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->ids, std::vector<int32_t>{kImEnd});
    *tokens = Tokens(chat.id());
  }

  // The session after round `last`: the system turn, then whole turns
  // only, each user turn exactly as rendered, the rounds in order up to
  // `last`, the final assistant turn open, earlier ones closed.
  void ExpectStartAndWholeTurns(const std::string& session, int last) {
    const std::vector<int32_t> tokens = Tokens(session);
    ASSERT_FALSE(tokens.empty());
    const std::string text = Text(tokens);
    ASSERT_EQ(text.rfind(kSystemTurn, 0), 0u) << text;
    std::vector<std::string> turns;
    for (size_t at = text.find("<|im_start|>", 1); at != std::string::npos;) {
      const size_t next = text.find("<|im_start|>", at + 1);
      turns.push_back(text.substr(at, next == std::string::npos ? std::string::npos : next - at));
      at = next;
    }
    // Every turn start in the ids is one in the text (no marker cut).
    EXPECT_EQ(static_cast<size_t>(std::count(tokens.begin(), tokens.end(), kImStart)), turns.size() + 1);
    ASSERT_GE(turns.size(), 2u) << text;
    // From the end: the open reply of round `last`, its question, the
    // closed reply of round last - 1, ... (the first kept turn may be a
    // reply whose question was dropped: turns, not exchanges, are whole).
    int round = last;
    for (size_t n = turns.size(); n-- > 0;) {
      const bool reply = (turns.size() - 1 - n) % 2 == 0;
      if (reply) {
        if (n + 1 < turns.size()) --round;  // an earlier round's reply
        EXPECT_EQ(turns[n].rfind("<|im_start|>assistant\n", 0), 0u) << text;
        const std::string& t = turns[n];
        const bool closed = t.size() >= 11 && t.compare(t.size() - 11, 11, "<|im_end|>\n") == 0;
        EXPECT_EQ(closed, n + 1 < turns.size()) << text;  // only the last one is open
      } else {
        EXPECT_EQ(turns[n], "<|im_start|>user\n" + Question(round) + "<|im_end|>\n") << text;
      }
    }
  }
};

// A reply that ends on <|im_end|> at the last position of the context:
// the turn closes with its "\n" as at any other length (the session may
// hold more tokens than its context; the next call slides before it
// prefills them), so the conversation's markup stays the template's.
TEST_F(ChatSlideTest, AReplyEndingAtTheContextsLastPositionStillClosesItsTurnWithTheNewline) {
  const v1::Session chat = CreateChat();
  std::vector<int32_t> tokens;
  ASSERT_NO_FATAL_FAILURE(ReplyEndingAtTheLastPosition(chat, &tokens));
  ASSERT_EQ(tokens.size(), static_cast<size_t>(kContext) + 1);
  EXPECT_EQ(tokens[kContext - 1], kImEnd);
  EXPECT_EQ(Text({tokens.back()}), "\n");
  // The next turn renders after it as the template does.
  Turn(chat.id(), 2);
  const std::string text = Text(Tokens(chat.id()));
  EXPECT_NE(text.find("<|im_end|>\n<|im_start|>user\n2. "), std::string::npos) << text;
}

// An ERROR session has no room for the "\n" after an <|im_end|> at its
// last position. The turn is closed all the same, and whatever comes next
// (here a turn with a per-call SLIDE) starts with that "\n", so the
// conversation's markup is still the template's.
TEST_F(ChatSlideTest, AnErrorChatsReplyEndingAtItsLimitGetsItsNewlineBeforeTheNextTurn) {
  const v1::Session chat = CreateChat("Answer briefly.", v1::CONTEXT_POLICY_ERROR);
  // A long first question (about 75 tokens) and a reply of the rest (about
  // 40), so that the slide below (half the context after the system turn)
  // drops the question and keeps the reply whose turn lacked its "\n".
  std::string question = "1. Tell me";
  while (question.size() < 380) question += " more about caches";
  std::vector<int32_t> tokens;
  ASSERT_NO_FATAL_FAILURE(ReplyEndingAtTheLastPosition(chat, &tokens, question));
  ASSERT_EQ(tokens.size(), static_cast<size_t>(kContext));
  EXPECT_EQ(tokens.back(), kImEnd);
  absl::StatusOr<v1::Session> closed = client_->GetSession(chat.id());
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_FALSE(closed->assistant_turn_open());
  const GenerateResult next = Ask(chat.id(), Question(2), 12, v1::CONTEXT_POLICY_SLIDE);
  EXPECT_GT(next.usage.tokens_dropped(), 0);
  // The system turn, the closed reply, question 2 and its open reply.
  const std::vector<int32_t> after = Tokens(chat.id());
  ASSERT_EQ(std::count(after.begin(), after.end(), kImStart), 4);
  ExpectStartAndWholeTurns(chat.id(), 2);
  const std::string text = Text(after);
  EXPECT_EQ(text.find("1. Tell me"), std::string::npos) << text;
  EXPECT_NE(text.find("<|im_end|>\n<|im_start|>user\n2. "), std::string::npos) << text;
}

TEST_F(ChatSlideTest, AChatSlidesByWholeTurnsKeepingItsSystemTurnAndIntactMarkup) {
  const v1::Session s = CreateChat();
  EXPECT_EQ(s.keep_tokens(), s.length());  // the system turn
  int64_t length = s.length(), dropped = 0;
  int slides = 0, unaligned = 0;
  for (int i = 0; i < 16; ++i) {
    const GenerateResult r = Turn(s.id(), i);
    ASSERT_EQ(r.ids.size(), 12u);
    EXPECT_EQ(r.usage.session_tokens(),
              length + r.usage.prompt_tokens() + r.usage.generated_tokens() - r.usage.tokens_dropped());
    EXPECT_LE(r.usage.session_tokens(), kContext);
    length = r.usage.session_tokens();
    if (r.usage.tokens_dropped() > 0) {
      ++slides;
      if (r.usage.tokens_dropped() % 16 != 0) ++unaligned;
    }
    dropped += r.usage.tokens_dropped();
    ExpectStartAndWholeTurns(s.id(), i);
    if (HasFatalFailure()) return;
  }
  EXPECT_GE(slides, 3);
  EXPECT_GT(unaligned, 0);  // turns, not pages
  absl::StatusOr<v1::Session> now = client_->GetSession(s.id());
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->length(), length);
  EXPECT_TRUE(now->chat());
  std::printf("16 rounds: %d slides, %lld tokens dropped, %lld tokens held\n", slides,
              static_cast<long long>(dropped), static_cast<long long>(length));
}

TEST_F(ChatSlideTest, ASlidChatSurvivesKill9AndContinuesExactlyLikeItsTwin) {
  const v1::Session s = CreateChat();
  int64_t dropped = 0;
  for (int i = 0; i < 8; ++i) dropped += Turn(s.id(), i).usage.tokens_dropped();
  ASSERT_GT(dropped, 0);
  // A twin (a fork: it shares the slid pages) goes on without the crash.
  v1::ForkRequest fork;
  fork.set_session_id(s.id());
  fork.set_count(1);
  absl::StatusOr<v1::ForkResponse> twin = client_->Fork(fork);
  ASSERT_TRUE(twin.ok()) << twin.status();
  const std::string twin_id = twin->sessions(0).id();
  std::vector<GenerateResult> expected;
  for (int i = 8; i < 14; ++i) expected.push_back(Turn(twin_id, i));
  const std::vector<int32_t> twin_tokens = Tokens(twin_id);

  server_->Kill();
  StartSlideServer();
  int64_t later_dropped = 0;
  for (int i = 8; i < 14; ++i) {
    const GenerateResult got = Turn(s.id(), i);
    const GenerateResult& want = expected[i - 8];
    EXPECT_EQ(got.ids, want.ids) << i;
    EXPECT_EQ(got.usage.tokens_dropped(), want.usage.tokens_dropped()) << i;
    EXPECT_EQ(got.usage.session_tokens(), want.usage.session_tokens()) << i;
    later_dropped += got.usage.tokens_dropped();
  }
  EXPECT_GT(later_dropped, 0);  // it slid again after the restart
  EXPECT_EQ(Tokens(s.id()), twin_tokens);
  ExpectStartAndWholeTurns(s.id(), 13);
}

// The kept full pages before the first dropped token are unchanged and keep
// their prefix-cache hashes; the partial kept page (rewritten with the
// moved turns) and every later one are salted: a fresh session given the
// slid session's tokens finds exactly the kept full pages in the cache.
TEST_F(ChatSlideTest, OnlyTheUnchangedKeptPagesOfASlidChatFeedAFreshPrompt) {
  const v1::Session s = CreateChat(
      "Answer briefly and precisely, in plain words, without lists or tables, and keep "
      "every reply under three short sentences.");
  const int keep = s.keep_tokens();
  ASSERT_GE(keep / 16, 1);
  ASSERT_NE(keep % 16, 0);  // the kept head ends inside a page
  int64_t dropped = 0;
  for (int i = 0; i < 8; ++i) dropped += Turn(s.id(), i).usage.tokens_dropped();
  ASSERT_GT(dropped, 0);
  const std::vector<int32_t> slid = Tokens(s.id());
  ASSERT_GT(static_cast<int>(slid.size()), keep + 16);
  v1::CreateSessionRequest create;
  create.mutable_sampling()->set_temperature(0);
  absl::StatusOr<v1::Session> fresh = client_->CreateSession(create);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_EQ(fresh->length(), 0);  // Qwen3: no BOS
  v1::AppendRequest append;
  append.set_session_id(fresh->id());
  for (int32_t id : slid) append.mutable_input()->mutable_tokens()->add_ids(id);
  absl::StatusOr<v1::AppendResponse> response = client_->Append(append);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->usage().cached_tokens(), keep / 16 * 16);
}

// A reply longer than the context leaves no turn boundary to cut at after
// the kept head: the slide falls back to whole pages (docs/api.md) and
// generation goes on, also after a restart.
TEST_F(ChatSlideTest, AReplyLongerThanTheContextFallsBackToSlidingByPages) {
  const v1::Session s = CreateChat();
  const GenerateResult r = Turn(s.id(), 0, 3 * kContext);
  EXPECT_EQ(r.ids.size(), static_cast<size_t>(3 * kContext));
  EXPECT_GT(r.usage.tokens_dropped(), 2 * kContext);
  EXPECT_LE(r.usage.session_tokens(), kContext);
  const std::vector<int32_t> tokens = Tokens(s.id());
  EXPECT_EQ(Text(tokens).rfind(kSystemTurn, 0), 0u);  // the kept head stays
  // Turn slides then page slides persist (one salt in the record) and the
  // conversation continues after kill -9.
  server_->Kill();
  StartSlideServer();
  EXPECT_EQ(Tokens(s.id()), tokens);
  EXPECT_EQ(Turn(s.id(), 1).ids.size(), 12u);
}

}  // namespace
}  // namespace kvs
