#include "service/migration_memory.h"

#include <gtest/gtest.h>

namespace kvs {
namespace {

TEST(MigrationMemory, TakesUpToTheTotalAndEachTenantsShareAndGetsItBackWhenALeaseEnds) {
  MigrationMemory memory(/*total_bytes=*/100, /*per_tenant_bytes=*/60);
  absl::StatusOr<MigrationMemory::Lease> a = memory.Take("acme", 50);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(memory.Take("acme", 20).status().code(), absl::StatusCode::kResourceExhausted) << "acme's share";
  absl::StatusOr<MigrationMemory::Lease> b = memory.Take("beta", 40);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->Grow(20).code(), absl::StatusCode::kResourceExhausted) << "the total";
  EXPECT_EQ(b->bytes(), 40) << "a refused Grow takes nothing";
  EXPECT_EQ(memory.held(), 90);
  { MigrationMemory::Lease gone = *std::move(a); }
  EXPECT_EQ(memory.held(), 40);
  EXPECT_EQ(memory.held_by("acme"), 0);
  EXPECT_TRUE(b->Grow(20).ok());
  EXPECT_EQ(memory.held_by("beta"), 60);
}

TEST(MigrationMemory, TheTenantOfAServerWithoutKeysHasTheWholeTotal) {
  MigrationMemory memory(/*total_bytes=*/100, /*per_tenant_bytes=*/60);
  absl::StatusOr<MigrationMemory::Lease> all = memory.Take("", 100);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(memory.Take("", 1).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(memory.Take("", 0).ok()) << "taking nothing always works";
}

}  // namespace
}  // namespace kvs
