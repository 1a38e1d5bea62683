// Records of sessions that slid (SLIDE): their page hashes chain from the
// record's slide salt, and validation checks them against that chain.
#include <numeric>

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

SessionRecord SlidRecord() {
  SessionRecord r;
  r.set_id("ses_1");
  r.set_model_fingerprint("model-a");
  *r.mutable_geometry() = ToGeometryRecord(Geometry());
  for (int t = 0; t < 19; ++t) r.add_tokens(100 + t);
  r.set_kv_length(18);
  r.set_slide_salt(std::string(SlideSalt(PageHash{}, 1, 2).view()));
  r.set_slide_salt_page(1);
  return r;
}

TEST(RecordSlideTest, ASlidRecordIsValidWithTheSaltedChainOnly) {
  SessionRecord r = SlidRecord();
  ASSERT_TRUE(FillPageHashes(&r).ok());
  absl::StatusOr<std::vector<PageHash>> hashes = CheckSessionRecord(r);
  ASSERT_TRUE(hashes.ok()) << hashes.status();
  std::vector<int32_t> tokens(r.tokens().begin(), r.tokens().end());
  const std::vector<PageHash> fresh = ChainPageHashes("model-a", Geometry(), tokens, 18);
  EXPECT_EQ((*hashes)[0], fresh[0]);  // before the salt: shared with fresh prompts
  EXPECT_NE((*hashes)[1], fresh[1]);
  // The fresh chain's hashes do not pass for a slid record, nor the salted
  // ones without the salt.
  SessionRecord forged = r;
  forged.clear_page_hashes();
  for (const PageHash& h : fresh) forged.add_page_hashes(std::string(h.view()));
  EXPECT_EQ(CheckSessionRecord(forged).status().code(), absl::StatusCode::kInvalidArgument);
  SessionRecord unsalted = r;
  unsalted.clear_slide_salt();
  EXPECT_EQ(CheckSessionRecord(unsalted).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RecordSlideTest, ABadSaltIsInvalid) {
  SessionRecord r = SlidRecord();
  ASSERT_TRUE(FillPageHashes(&r).ok());
  r.set_slide_salt("short");
  EXPECT_EQ(CheckSessionRecord(r).status().code(), absl::StatusCode::kInvalidArgument);
  r = SlidRecord();
  r.set_slide_salt_page(-1);
  EXPECT_EQ(FillPageHashes(&r).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RecordSlideTest, IncrementalVerificationRehashesFromTheSaltOfANewSlide) {
  // The record before the slide (no salt) is the reference; the slid one
  // lists the same tokens and, before its salt, the same hashes.
  SessionRecord before = SlidRecord();
  before.clear_slide_salt();
  before.set_slide_salt_page(0);
  ASSERT_TRUE(FillPageHashes(&before).ok());
  int64_t hashed = 0;
  absl::StatusOr<VerifiedPages> ref = VerifySessionRecord(before, nullptr, &hashed);
  ASSERT_TRUE(ref.ok()) << ref.status();
  SessionRecord after = SlidRecord();
  ASSERT_TRUE(FillPageHashes(&after).ok());
  hashed = 0;
  ASSERT_TRUE(VerifySessionRecord(after, &*ref, &hashed).ok());
  EXPECT_EQ(hashed, 4);  // pages 1..4; page 0 reused
  // A record claiming the unsalted hashes past the salt fails even with
  // that reference.
  SessionRecord forged = after;
  forged.clear_page_hashes();
  for (const std::string& h : before.page_hashes()) forged.add_page_hashes(h);
  EXPECT_EQ(VerifySessionRecord(forged, &*ref, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvs
