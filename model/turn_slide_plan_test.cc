// PlanTurnSlide: a chat session's slide begins and ends at turn starts.
#include "model/turn_slide_plan.h"

#include <vector>

#include "gtest/gtest.h"

namespace kvs {
namespace {

constexpr int32_t kTurn = 9;  // the turn-opening token
const std::vector<int32_t> kTurnIds = {kTurn};

// A BOS (1), then turns of the given lengths, each `kTurn` then filler.
std::vector<int32_t> Conversation(const std::vector<int>& turn_lengths) {
  std::vector<int32_t> tokens = {1};
  for (int n : turn_lengths) {
    tokens.push_back(kTurn);
    for (int i = 1; i < n; ++i) tokens.push_back(100 + i);
  }
  return tokens;
}

TEST(PlanTurnSlide, KeepsTheConversationStartAndDropsWholeTurnsUpToAboutHalfTheContext) {
  // Turns start at 1, 11, 21, 31, 41, 51 (64 tokens, context 64).
  const std::vector<int32_t> tokens = Conversation({10, 10, 10, 10, 10, 13});
  std::optional<TokenSlide> s = PlanTurnSlide(tokens, 64, 64, 0, kTurnIds);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->keep_tokens, 1);                    // the BOS
  EXPECT_EQ(s->keep_tokens + s->drop_tokens, 41);  // first turn start >= 1 + 63 / 2
}

TEST(PlanTurnSlide, RoundsKeepTokensUpToTheNextTurnStart) {
  const std::vector<int32_t> tokens = Conversation({10, 10, 10, 10, 10, 13});
  std::optional<TokenSlide> s = PlanTurnSlide(tokens, 64, 64, 5, kTurnIds);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->keep_tokens, 11);  // the whole first turn (a system prompt) stays
  EXPECT_EQ(s->keep_tokens + s->drop_tokens, 41);  // >= 11 + 53 / 2 = 37
  s = PlanTurnSlide(tokens, 64, 64, 11, kTurnIds);  // already at a turn start
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->keep_tokens, 11);
}

TEST(PlanTurnSlide, ALongLastTurnDropsEveryTurnBeforeIt) {
  // Turns at 1, 6, 11; the last one holds 53 tokens.
  const std::vector<int32_t> tokens = Conversation({5, 5, 53});
  std::optional<TokenSlide> s = PlanTurnSlide(tokens, 64, 64, 0, kTurnIds);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->keep_tokens, 1);
  EXPECT_EQ(s->drop_tokens, 10);
}

TEST(PlanTurnSlide, TheNextTurnStartNotYetComputedMayEndTheDrop) {
  // 64 tokens with KV, then a new turn's start waiting to be computed.
  std::vector<int32_t> tokens = Conversation({63});
  tokens.push_back(kTurn);
  std::optional<TokenSlide> s = PlanTurnSlide(tokens, 64, 64, 0, kTurnIds);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->keep_tokens, 1);
  EXPECT_EQ(s->drop_tokens, 63);
}

TEST(PlanTurnSlide, NoTurnBoundaryToCutAtIsNoPlan) {
  // One turn longer than the context: the caller slides by pages.
  EXPECT_FALSE(PlanTurnSlide(Conversation({63}), 64, 64, 0, kTurnIds).has_value());
  // keep_tokens inside the last turn.
  EXPECT_FALSE(PlanTurnSlide(Conversation({10, 53}), 64, 64, 20, kTurnIds).has_value());
  // A template without turn markers.
  EXPECT_FALSE(PlanTurnSlide(Conversation({10, 53}), 64, 64, 0, {}).has_value());
}

}  // namespace
}  // namespace kvs
