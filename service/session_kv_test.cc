// SessionKv's slide of a chat session (the engine's SLIDE policy): when no
// turn boundary allows a drop, it slides by whole pages, and still keeps
// the conversation start (the template's default system prompt or BOS),
// as docs/api.md "Context overflow" promises for every chat slide.
#include "service/session_kv.h"

#include <vector>

#include <gtest/gtest.h>

#include "model/key_rotation.h"
#include "service/chat_state.h"
#include "service/service_test_env.h"

namespace kvs {
namespace {

TEST(SessionKvSlide, AChatSlideThatFallsBackToPagesKeepsTheConversationStart) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env(256, 16);
  absl::StatusOr<std::shared_ptr<Session>> made = env.sessions().CreateAcquired(SamplingParams{}, {});
  ASSERT_TRUE(made.ok()) << made.status();
  Session& s = **made;
  std::vector<int32_t> tokens;
  for (int i = 0; i < 100; ++i) tokens.push_back(10 + i);  // no turn start among them
  env.Prefill(s, tokens);
  const std::vector<int32_t> before = s.tokens;
  s.chat.started = true;
  s.keep_tokens = 0;  // the request kept nothing: the conversation start still stays
  ChatJob chat;
  chat.turn_start_ids = {5};
  chat.conversation_start_tokens = 20;

  SessionKv kv = env.sessions().OpenKv(s);
  const KeyRotation rotation(env.model().config(), env.model().weights());
  absl::StatusOr<int> dropped = kv.Slide(rotation, /*max_context=*/64, &chat);
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_GT(*dropped, 0);
  ASSERT_GE(s.tokens.size(), 20u);
  EXPECT_EQ(std::vector<int32_t>(s.tokens.begin(), s.tokens.begin() + 20),
            std::vector<int32_t>(before.begin(), before.begin() + 20))
      << "the page rule dropped the conversation start";
  EXPECT_EQ(s.tokens.size() + static_cast<size_t>(*dropped), before.size());
  env.sessions().Discard(*made);
}

}  // namespace
}  // namespace kvs
