// CheckImportedSession: what an imported record may hold beyond the
// store's invariants (service/import_checks.h).
#include "service/import_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "model/sampler.h"
#include "service/record_convert.h"

namespace kvs {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kVocab = 256;
constexpr int32_t kContext = 128;
constexpr int32_t kPageTokens = 16;

// A record as a server writes it: tokens of the vocabulary, the default
// sampling, ERROR policy.
SessionRecord Written() {
  SessionRecord r;
  for (int t = 0; t < 20; ++t) r.add_tokens(t * 12);
  r.set_kv_length(19);
  *r.mutable_sampling() = ToRecord(SamplingParams{});
  return r;
}

void ExpectRefused(const SessionRecord& r, const std::string& named) {
  const absl::Status st = CheckImportedSession(r, kVocab, kContext, kPageTokens);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr(named));
}

TEST(ImportChecks, ARecordAsAServerWritesItPasses) {
  EXPECT_TRUE(CheckImportedSession(Written(), kVocab, kContext, kPageTokens).ok());
  SessionRecord slid = Written();
  slid.set_context_policy(1);
  slid.set_keep_tokens(16);
  slid.set_tokens_dropped(4096);
  EXPECT_TRUE(CheckImportedSession(slid, kVocab, kContext, kPageTokens).ok());
}

TEST(ImportChecks, ATokenOutsideTheVocabularyIsRefused) {
  for (int32_t forged : {-1, kVocab, 2147483647}) {
    SessionRecord r = Written();
    r.set_tokens(19, forged);
    ExpectRefused(r, "outside the vocabulary");
  }
}

TEST(ImportChecks, AKvOverTheLastTokenIsRefused) {
  SessionRecord all = Written();
  all.set_kv_length(all.tokens_size());
  ExpectRefused(all, "KV for 20 positions and 20 tokens");
  SessionRecord behind = Written();
  behind.set_kv_length(3);  // as a cancelled Append may leave it
  EXPECT_TRUE(CheckImportedSession(behind, kVocab, kContext, kPageTokens).ok());
  SessionRecord empty;
  *empty.mutable_sampling() = ToRecord(SamplingParams{});
  EXPECT_TRUE(CheckImportedSession(empty, kVocab, kContext, kPageTokens).ok())
      << "no tokens, no KV: a vocabulary without BOS";
}

TEST(ImportChecks, SamplingDefaultsARequestCouldNotSetAreRefused) {
  SessionRecord none = Written();
  none.clear_sampling();
  ExpectRefused(none, "top_p");
  SessionRecord hot = Written();
  hot.mutable_sampling()->set_temperature(1000);
  ExpectRefused(hot, "temperature");
  SessionRecord bias = Written();
  (*bias.mutable_sampling()->mutable_logit_bias())[kVocab] = 1;
  ExpectRefused(bias, "logit_bias token id 256 is outside the vocabulary");
}

TEST(ImportChecks, AnUnknownContextPolicyOrANegativeCountIsRefused) {
  SessionRecord policy = Written();
  policy.set_context_policy(2);
  ExpectRefused(policy, "context policy 2");
  SessionRecord keep = Written();
  keep.set_keep_tokens(-1);
  ExpectRefused(keep, "keep_tokens -1");
  SessionRecord dropped = Written();
  dropped.set_tokens_dropped(-5);
  ExpectRefused(dropped, "tokens_dropped -5");
}

// Values a slide's arithmetic would overflow on: a server clamps
// keep_tokens to its context, a slide adds to tokens_dropped, and a salt
// page lies within the tokens.
TEST(ImportChecks, SlideStateNoServerCouldReachIsRefused) {
  SessionRecord keep = Written();
  keep.set_context_policy(1);
  keep.set_keep_tokens(kContext + 1);
  ExpectRefused(keep, "keep_tokens 129");
  keep.set_keep_tokens(kContext);
  EXPECT_TRUE(CheckImportedSession(keep, kVocab, kContext, kPageTokens).ok());
  SessionRecord dropped = Written();
  dropped.set_tokens_dropped(int64_t{1} << 62);
  ExpectRefused(dropped, "tokens_dropped");
  SessionRecord salted = Written();  // 20 tokens: pages 0 and 1
  salted.set_slide_salt(std::string(16, 'x'));
  salted.set_slide_salt_page(1);
  EXPECT_TRUE(CheckImportedSession(salted, kVocab, kContext, kPageTokens).ok());
  salted.set_slide_salt_page(2);
  ExpectRefused(salted, "slide salt at page 2");
  salted.set_slide_salt_page(1 << 28);  // times 16 overflows an int
  ExpectRefused(salted, "slide salt at page");
}

}  // namespace
}  // namespace kvs
