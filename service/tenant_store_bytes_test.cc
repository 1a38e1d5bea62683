#include "service/tenant_store_bytes.h"

#include <vector>

#include "gtest/gtest.h"

namespace kvs {
namespace {

KvGeometry Geometry() { return {.n_layers = 2, .n_kv_heads = 2, .head_dim = 8, .page_tokens = 16}; }

PageHash Hash(uint8_t b) {
  PageHash h;
  h.bytes.fill(b);
  return h;
}

int64_t Page(int tokens) { return static_cast<int64_t>(EncodedPageBytes(Geometry(), tokens)); }

TEST(TenantStoreBytes, ARecordCountsItsBytesAndEachPageAtTheTokensItHolds) {
  TenantStoreBytes ledger(Geometry());
  const std::vector<PageHash> pages = {Hash(1), Hash(2), Hash(3)};
  ledger.Add("acme", {.record_bytes = 500, .kv_length = 40, .pages = pages});  // 16 + 16 + 8 tokens
  EXPECT_EQ(ledger.bytes("acme"), 500 + 2 * Page(16) + Page(8));
  EXPECT_EQ(ledger.bytes("beta"), 0);
}

TEST(TenantStoreBytes, APageSharedByRecordsCountsOnceAndStaysUntilItsLastRecordGoes) {
  TenantStoreBytes ledger(Geometry());
  const std::vector<PageHash> source = {Hash(1), Hash(2)};
  const std::vector<PageHash> branch = {Hash(1), Hash(9)};
  ledger.Add("acme", {.record_bytes = 100, .kv_length = 32, .pages = source});
  ledger.Add("acme", {.record_bytes = 120, .kv_length = 20, .pages = branch});
  EXPECT_EQ(ledger.bytes("acme"), 220 + 2 * Page(16) + Page(4));
  ledger.Remove("acme", {.record_bytes = 100, .kv_length = 32, .pages = source});
  EXPECT_EQ(ledger.bytes("acme"), 120 + Page(16) + Page(4)) << "the shared page stays with the branch";
  ledger.Remove("acme", {.record_bytes = 120, .kv_length = 20, .pages = branch});
  EXPECT_EQ(ledger.bytes("acme"), 0);
}

TEST(TenantStoreBytes, TenantsAreCountedApartEvenForTheSameHash) {
  TenantStoreBytes ledger(Geometry());
  const std::vector<PageHash> pages = {Hash(7)};
  ledger.Add("acme", {.record_bytes = 10, .kv_length = 16, .pages = pages});
  ledger.Add("beta", {.record_bytes = 20, .kv_length = 16, .pages = pages});
  EXPECT_EQ(ledger.bytes("acme"), 10 + Page(16));
  EXPECT_EQ(ledger.bytes("beta"), 20 + Page(16));
  ledger.Remove("acme", {.record_bytes = 10, .kv_length = 16, .pages = pages});
  EXPECT_EQ(ledger.bytes("acme"), 0);
  EXPECT_EQ(ledger.bytes("beta"), 20 + Page(16));
}

TEST(TenantStoreBytes, ARecordWithNoPagesCountsItsBytesAlone) {
  TenantStoreBytes ledger(Geometry());
  ledger.Add("acme", {.record_bytes = 64, .kv_length = 0, .pages = {}});
  EXPECT_EQ(ledger.bytes("acme"), 64);
  ledger.Remove("acme", {.record_bytes = 64, .kv_length = 0, .pages = {}});
  EXPECT_EQ(ledger.bytes("acme"), 0);
}

}  // namespace
}  // namespace kvs
