// Page hashes per tenant: a session's chain starts from its owner's
// TenantChainStart, so two tenants' identical tokens never share a page
// hash (no prefix-cache hit across tenants, in RAM or on disk), and the
// store's validation checks each record against its owner's chain.
#include "cache/page_hash.h"
#include "cache/page_hash_chain.h"
#include "cache/record_validation.h"
#include "cache/session_record.pb.h"
#include "gtest/gtest.h"

namespace kvs {
namespace {

KvGeometry Geometry() {
  return {.n_layers = 2, .n_kv_heads = 1, .head_dim = 8, .page_tokens = 4, .dtype = KvDtype::kF16};
}

SessionRecord RecordOf(const std::string& owner) {
  SessionRecord r;
  r.set_id("ses_1");
  r.set_model_fingerprint("model-a");
  *r.mutable_geometry() = ToGeometryRecord(Geometry());
  for (int t = 0; t < 11; ++t) r.add_tokens(100 + t);
  r.set_kv_length(10);
  r.set_owner(owner);
  EXPECT_TRUE(FillPageHashes(&r).ok());
  return r;
}

TEST(RecordTenantTest, TheDefaultTenantAndRecordsWithoutAnOwnerChainFromZerosAsBefore) {
  EXPECT_EQ(TenantChainStart(""), PageHash{});
  EXPECT_EQ(TenantChainStart("default"), PageHash{});
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  PageHashChain chain("model-a", Geometry(), TenantChainStart("default"));
  chain.Extend(tokens);
  EXPECT_EQ(std::vector<PageHash>(chain.hashes().begin(), chain.hashes().end()),
            ChainPageHashes("model-a", Geometry(), tokens, 8));
  EXPECT_EQ(RecordOf("").page_hashes(0), RecordOf("default").page_hashes(0));
}

TEST(RecordTenantTest, TwoTenantsIdenticalTokensHaveDifferentPageHashesAndOneTenantsAreStable) {
  EXPECT_NE(TenantChainStart("acme"), PageHash{});
  EXPECT_NE(TenantChainStart("acme"), TenantChainStart("beta"));
  EXPECT_EQ(TenantChainStart("acme"), TenantChainStart("acme"));
  const SessionRecord acme = RecordOf("acme"), beta = RecordOf("beta"), shared = RecordOf("");
  for (int i = 0; i < acme.page_hashes_size(); ++i) {
    EXPECT_NE(acme.page_hashes(i), beta.page_hashes(i)) << i;
    EXPECT_NE(acme.page_hashes(i), shared.page_hashes(i)) << i;
    EXPECT_EQ(acme.page_hashes(i), RecordOf("acme").page_hashes(i)) << i;
  }
}

TEST(RecordTenantTest, ARecordValidatesOnlyWithItsOwnersChain) {
  const SessionRecord acme = RecordOf("acme");
  ASSERT_TRUE(CheckSessionRecord(acme).ok());
  SessionRecord moved = acme;  // another owner, the same page hashes
  moved.set_owner("beta");
  EXPECT_EQ(CheckSessionRecord(moved).status().code(), absl::StatusCode::kInvalidArgument);
  // Not even against a verified reference of the same tokens (incremental
  // verification reuses pages only from the same chain start).
  absl::StatusOr<VerifiedPages> reference = VerifySessionRecord(acme, nullptr, nullptr);
  ASSERT_TRUE(reference.ok());
  EXPECT_EQ(VerifySessionRecord(moved, &*reference, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  int64_t hashed = 0;
  EXPECT_TRUE(VerifySessionRecord(acme, &*reference, &hashed).ok());
  EXPECT_EQ(hashed, 0);
}

// kvsessiond --shared-prefix-cache: a record saying so chains from zeros
// whatever its owner, and the flag, not the server's setting, decides how
// it validates (a store written under either setting loads under both).
TEST(RecordTenantTest, ASharedPrefixChainRecordChainsFromZerosAndValidatesOnlyAsShared) {
  EXPECT_EQ(ChainStart("acme", true), PageHash{});
  EXPECT_EQ(ChainStart("acme", false), TenantChainStart("acme"));
  SessionRecord shared;
  shared = RecordOf("acme");
  shared.set_shared_prefix_chain(true);
  ASSERT_TRUE(FillPageHashes(&shared).ok());
  EXPECT_EQ(shared.page_hashes(0), RecordOf("default").page_hashes(0));
  EXPECT_NE(shared.page_hashes(0), RecordOf("acme").page_hashes(0));
  ASSERT_TRUE(CheckSessionRecord(shared).ok());
  SessionRecord flipped = shared;  // the same hashes, claimed salted
  flipped.set_shared_prefix_chain(false);
  EXPECT_EQ(CheckSessionRecord(flipped).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<VerifiedPages> reference = VerifySessionRecord(shared, nullptr, nullptr);
  ASSERT_TRUE(reference.ok());
  EXPECT_EQ(reference->start, PageHash{});
  EXPECT_EQ(VerifySessionRecord(flipped, &*reference, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvs
