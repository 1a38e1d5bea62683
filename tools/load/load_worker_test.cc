// Tests of load_worker.h's SessionTarget: how many sessions a worker keeps
// its tenant near, with and without a quota.
#include "tools/load/load_worker.h"

#include <gtest/gtest.h>

namespace kvs::load {
namespace {

TEST(SessionTarget, IsTheOptionsTargetWithoutAQuota) {
  EXPECT_EQ(SessionTarget(16, std::nullopt), 16u);
}

TEST(SessionTarget, IsAMaxSessionsQuotaWhenThatIsLower) {
  EXPECT_EQ(SessionTarget(16, LoadQuota{"max_sessions", 4}), 4u);
  EXPECT_EQ(SessionTarget(3, LoadQuota{"max_sessions", 4}), 3u);
}

TEST(SessionTarget, IgnoresQuotasOnAnythingButSessions) {
  EXPECT_EQ(SessionTarget(16, LoadQuota{"max_checkpoints", 2}), 16u);
  EXPECT_EQ(SessionTarget(16, LoadQuota{"max_kv_bytes", 1}), 16u);
}

TEST(SessionTarget, IsAtLeastOneSession) {
  EXPECT_EQ(SessionTarget(0, std::nullopt), 1u);
  EXPECT_EQ(SessionTarget(16, LoadQuota{"max_sessions", 1}), 1u);
}

}  // namespace
}  // namespace kvs::load
