// Tests of load_worker.h's SessionTarget: how many sessions a worker keeps
// its tenant near, with and without a quota.
#include "tools/load/load_worker.h"

#include <gtest/gtest.h>

namespace kvs::load {
namespace {

TEST(SessionTarget, IsTheOptionsTargetWithoutAQuota) {
  EXPECT_EQ(SessionTarget(16, {}), 16u);
}

TEST(SessionTarget, IsAMaxSessionsQuotaWhenThatIsLower) {
  EXPECT_EQ(SessionTarget(16, {{"max_sessions", 4}}), 4u);
  EXPECT_EQ(SessionTarget(3, {{"max_sessions", 4}}), 3u);
}

TEST(SessionTarget, IgnoresQuotasOnAnythingButSessions) {
  EXPECT_EQ(SessionTarget(16, {{"max_checkpoints", 2}}), 16u);
  EXPECT_EQ(SessionTarget(16, {{"max_kv_bytes", 1}}), 16u);
}

TEST(SessionTarget, FindsMaxSessionsAmongSeveralQuotas) {
  EXPECT_EQ(SessionTarget(16, {{"max_store_bytes", 300000}, {"max_sessions", 5}}), 5u);
}

TEST(SessionTarget, IsAtLeastOneSession) {
  EXPECT_EQ(SessionTarget(0, {}), 1u);
  EXPECT_EQ(SessionTarget(16, {{"max_sessions", 1}}), 1u);
}

}  // namespace
}  // namespace kvs::load
