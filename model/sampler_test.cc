#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/softmax_denominator.h"

namespace kvs {
namespace {

using ::testing::HasSubstr;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

TEST(SamplingParamsTest, RejectsInvalidValuesNamingTheParameter) {
  SamplingParams p;
  EXPECT_TRUE(p.Validate().ok());
  p.temperature = -0.5f;
  EXPECT_THAT(Msg(p.Validate()), HasSubstr("temperature"));
  p = {};
  p.temperature = std::nanf("");
  EXPECT_EQ(p.Validate().code(), absl::StatusCode::kInvalidArgument);
  p = {};
  p.top_k = -1;
  EXPECT_THAT(Msg(p.Validate()), HasSubstr("top_k"));
  p = {};
  p.top_p = 0.0f;
  EXPECT_THAT(Msg(p.Validate()), HasSubstr("top_p"));
  p = {};
  p.top_p = 1.5f;
  EXPECT_THAT(Msg(p.Validate()), HasSubstr("top_p"));
  p = {};
  p.min_p = 2.0f;
  EXPECT_THAT(Msg(p.Validate()), HasSubstr("min_p"));
  p = {};
  p.repetition_penalty = 0.0f;
  EXPECT_THAT(Msg(p.Validate()), HasSubstr("repetition_penalty"));
  p = {};
  p.repetition_last_n = -2;
  EXPECT_THAT(Msg(p.Validate()), HasSubstr("repetition_last_n"));
}

TEST(SamplingParamsTest, LogitBiasIsBoundedInCountValueAndVocabulary) {
  SamplingParams p;
  p.logit_bias = {{3, 100.0f}, {5, -100.0f}};
  EXPECT_TRUE(p.ValidateFor(8).ok());
  EXPECT_THAT(Msg(p.ValidateFor(5)), HasSubstr("outside the vocabulary"));
  p.logit_bias = {{3, 100.5f}};
  EXPECT_THAT(Msg(p.Validate()), HasSubstr("[-100, 100]"));
  p.logit_bias = {{3, std::nanf("")}};
  EXPECT_EQ(p.Validate().code(), absl::StatusCode::kInvalidArgument);
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_THAT(Msg(p.Validate()), HasSubstr("negative"));
  p.logit_bias.clear();
  for (int i = 0; i <= SamplingParams::kMaxLogitBias; ++i) p.logit_bias.push_back({i, 1.0f});
  EXPECT_THAT(Msg(p.Validate()), HasSubstr("at most 64"));
}

TEST(SamplerTest, LogitBiasForcesOrBansATokenAndLeavesTheLogitsUntouched) {
  Sampler sampler(4);
  const std::vector<float> logits = {0.5f, 3.0f, 1.0f, 0.0f};
  SequenceRng rng(1);
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(sampler.Sample(p, logits, {}, &rng), 1);
  p.logit_bias = {{1, -100.0f}};
  EXPECT_EQ(sampler.Sample(p, logits, {}, &rng), 2);  // banned: the next best
  p.logit_bias = {{3, 100.0f}};
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sampler.Sample(p, logits, {}, &rng), 3);
  EXPECT_EQ(logits, (std::vector<float>{0.5f, 3.0f, 1.0f, 0.0f}));
}

TEST(SamplerTest, GreedyIsArgmaxWithLowestIdOnTies) {
  Sampler s(5);
  SamplingParams p;
  p.temperature = 0;
  SequenceRng rng(1);
  const std::vector<float> logits = {0.1f, 3.0f, -1.0f, 3.0f, 2.9f};
  EXPECT_EQ(s.Sample(p, logits, {}, &rng), 1);
  EXPECT_EQ(rng, SequenceRng(1)) << "greedy must not consume randomness";
}

TEST(SamplerTest, SameSeedSameDrawsDifferentSeedDifferentDraws) {
  Sampler s(100);
  std::vector<float> logits(100);
  for (int i = 0; i < 100; ++i) logits[i] = std::sin(i * 0.7f);
  SamplingParams p;
  p.top_k = 0;
  p.top_p = 1;
  p.min_p = 0;
  p.temperature = 1.5f;
  auto draws = [&](uint64_t seed) {
    SequenceRng rng(seed);
    std::vector<int> out;
    for (int i = 0; i < 50; ++i) out.push_back(s.Sample(p, logits, {}, &rng));
    return out;
  };
  EXPECT_EQ(draws(7), draws(7));
  EXPECT_NE(draws(7), draws(8));
}

TEST(SamplerTest, RngStateRoundTripContinuesTheSameStream) {
  SequenceRng a(42);
  for (int i = 0; i < 10; ++i) a.Next();
  SequenceRng b;
  b.set_state(a.state());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.Next(), b.Next());
}

// Empirical frequencies of 40000 draws.
std::map<int, double> Frequencies(const SamplingParams& p, const std::vector<float>& logits) {
  Sampler s(static_cast<int>(logits.size()));
  SequenceRng rng(123);
  std::map<int, double> f;
  const int n = 40000;
  for (int i = 0; i < n; ++i) f[s.Sample(p, logits, {}, &rng)] += 1.0 / n;
  return f;
}

SamplingParams Untruncated() {
  SamplingParams p;
  p.temperature = 1;
  p.top_k = 0;
  p.top_p = 1;
  p.min_p = 0;
  return p;
}

const std::vector<float> kLogits = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                                    std::log(0.05f)};

TEST(SamplerTest, TemperatureOneFollowsTheSoftmax) {
  auto f = Frequencies(Untruncated(), kLogits);
  EXPECT_NEAR(f[0], 0.5, 0.015);
  EXPECT_NEAR(f[1], 0.3, 0.015);
  EXPECT_NEAR(f[2], 0.15, 0.015);
  EXPECT_NEAR(f[3], 0.05, 0.01);
}

TEST(SamplerTest, LowTemperatureSharpens) {
  SamplingParams p = Untruncated();
  p.temperature = 0.25f;  // p ~ q^4: 0.5^4 : 0.3^4 ... -> token 0 ~ 0.87
  auto f = Frequencies(p, kLogits);
  const double z = std::pow(0.5, 4) + std::pow(0.3, 4) + std::pow(0.15, 4) + std::pow(0.05, 4);
  EXPECT_NEAR(f[0], std::pow(0.5, 4) / z, 0.015);
}

TEST(SamplerTest, TopKTopPMinPTruncate) {
  SamplingParams p = Untruncated();
  p.top_k = 2;
  auto f = Frequencies(p, kLogits);
  EXPECT_EQ(f.count(2) + f.count(3), 0u);
  EXPECT_NEAR(f[0], 0.5 / 0.8, 0.015);

  p = Untruncated();
  p.top_p = 0.6f;  // 0.5 < 0.6, 0.5 + 0.3 >= 0.6: keep tokens 0 and 1
  f = Frequencies(p, kLogits);
  EXPECT_EQ(f.count(2) + f.count(3), 0u);
  EXPECT_GT(f[1], 0.3);

  p = Untruncated();
  p.min_p = 0.25f;  // keep p >= 0.125: tokens 0, 1, 2
  f = Frequencies(p, kLogits);
  EXPECT_EQ(f.count(3), 0u);
  EXPECT_GT(f[2], 0.1);

  p = Untruncated();
  p.top_k = 1;
  p.temperature = 5;
  f = Frequencies(p, kLogits);
  EXPECT_EQ(f.size(), 1u) << "top_k = 1 is greedy at any temperature";
}

// The pipeline of sampler.h written plainly with top-k off: (logit, id)
// pairs of every non-NaN logit, std::sort by logit descending and id
// ascending; the top-p normalizer is the softmax denominator as
// kernels/softmax_denominator.h defines it (eight running sums over the
// ids, in id order); then top-p, min-p, temperature and the draw over the
// sorted order, every weight ExpOfNonPositive. No penalty or bias.
int32_t SortedPipelineDraw(const SamplingParams& p, const std::vector<float>& l, SequenceRng* rng) {
  std::vector<std::pair<float, int32_t>> c;
  for (size_t i = 0; i < l.size(); ++i) {
    if (!std::isnan(l[i])) c.emplace_back(l[i], static_cast<int32_t>(i));
  }
  std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  if (c.empty()) return 0;
  const float max_logit = c[0].first;
  double lanes[8] = {};
  for (size_t i = 0; i < l.size(); ++i) {
    if (!std::isnan(l[i])) lanes[i % 8] += ExpOfNonPositive(static_cast<double>(l[i] - max_logit));
  }
  const double total =
      ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  if (p.top_p < 1.0f) {
    double cumulative = 0;
    size_t n = 0;
    while (n < c.size()) {
      cumulative += ExpOfNonPositive(static_cast<double>(c[n].first - max_logit)) / total;
      ++n;
      if (cumulative >= p.top_p) break;
    }
    c.resize(n);
  }
  if (p.min_p > 0.0f) {
    const float threshold = max_logit + std::log(p.min_p);
    size_t n = 1;
    while (n < c.size() && c[n].first >= threshold) ++n;
    c.resize(n);
  }
  double drawn_total = 0;
  for (auto& e : c) {
    e.first = static_cast<float>(ExpOfNonPositive(static_cast<double>(e.first - max_logit) / p.temperature));
    drawn_total += e.first;
  }
  const double u = rng->Uniform() * drawn_total;
  double cumulative = 0;
  for (const auto& e : c) {
    cumulative += e.first;
    if (u < cumulative) return e.second;
  }
  return c.back().second;
}

TEST(SamplerTest, WithTopKOffDrawsExactlyWhatASortedPipelineDraws) {
  // Vocabularies with ties, both zeros, infinities and NaNs, under top-p,
  // min-p, both and neither: the same token for the same RNG state, draw
  // after draw, as a std::sort of the whole vocabulary gives. Flat logits
  // (top-p reaches past the best kFewCandidates, so the sampler sorts the
  // whole vocabulary) and peaked ones, as a model gives (the truncations
  // stop within the first TopK), both at 151,936 tokens.
  std::mt19937 gen(17);
  std::normal_distribution<float> nd(0, 3);
  std::uniform_int_distribution<int> coarse(-6, 6);
  std::vector<std::vector<float>> vocabularies;
  for (int n : {1, 3, 1000, 151936}) {
    std::vector<float> x(n);
    for (float& v : x) v = nd(gen);
    vocabularies.push_back(x);
  }
  std::vector<float> peaked(151936);
  for (float& v : peaked) v = nd(gen) * 0.7f;
  for (int i = 0; i < 40; ++i) peaked[(i * 3701 + 11) % peaked.size()] = 12.0f + nd(gen);
  vocabularies.push_back(peaked);
  std::vector<float> ties(4000);
  for (size_t i = 0; i < ties.size(); ++i) {
    ties[i] = i % 11 == 0 ? -0.0f : static_cast<float>(coarse(gen)) * 0.25f;
  }
  ties[17] = std::nanf("");
  ties[900] = -std::numeric_limits<float>::infinity();
  vocabularies.push_back(ties);
  for (const std::vector<float>& logits : vocabularies) {
    Sampler sampler(static_cast<int>(logits.size()));
    for (float top_p : {1.0f, 0.95f, 0.5f}) {
      for (float min_p : {0.0f, 0.05f}) {
        SamplingParams p;
        p.top_k = 0;
        p.top_p = top_p;
        p.min_p = min_p;
        p.temperature = top_p == 0.5f ? 1.7f : 0.8f;
        SequenceRng rng(99), reference_rng(99);
        const int draws = logits.size() > 10000 ? 3 : 20;  // the reference sorts per draw
        for (int draw = 0; draw < draws; ++draw) {
          const int32_t want = SortedPipelineDraw(p, logits, &reference_rng);
          ASSERT_EQ(sampler.Sample(p, logits, {}, &rng), want)
              << "vocabulary " << logits.size() << ", top_p " << top_p << ", min_p " << min_p
              << ", draw " << draw;
          ASSERT_EQ(rng, reference_rng);
        }
      }
    }
  }
}

TEST(SamplerTest, AnInfiniteLargestLogitIsDrawnAsGreedyWouldPickItAndAnEmptyVocabularyGivesZero) {
  std::vector<float> logits = {1.0f, std::numeric_limits<float>::infinity(), 3.0f,
                               std::numeric_limits<float>::infinity()};
  Sampler s(4);
  SequenceRng rng(5);
  for (int top_k : {0, 2, 40}) {
    SamplingParams p;
    p.top_k = top_k;
    for (int draw = 0; draw < 5; ++draw) EXPECT_EQ(s.Sample(p, logits, {}, &rng), 1) << "top_k " << top_k;
  }
  const float minus_inf = -std::numeric_limits<float>::infinity();
  const std::vector<float> all_minus_inf = {minus_inf, minus_inf, minus_inf, minus_inf};
  for (int top_k : {0, 2}) {
    SamplingParams p;
    p.top_k = top_k;
    EXPECT_EQ(s.Sample(p, all_minus_inf, {}, &rng), 0) << "top_k " << top_k;
  }
  Sampler empty(0);
  EXPECT_EQ(empty.Sample(SamplingParams{}, {}, {}, &rng), 0);
}

// Log-probabilities of logits that are not all finite are the softmax's
// limits, never NaN (a client's JSON has no NaN): the logits at +inf share
// the mass, and logits all at -inf are uniform.
TEST(SamplerTest, LogprobsOfInfiniteLogitsAreTheSoftmaxsLimitsNotNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> two_at_inf = {1.0f, inf, 3.0f, inf};
  Sampler s(4);
  EXPECT_FLOAT_EQ(Sampler::Logprob(two_at_inf, 1), -std::log(2.0f));
  EXPECT_EQ(Sampler::Logprob(two_at_inf, 2), -inf);
  float logprob = 0;
  std::pair<int32_t, float> top[3];
  ASSERT_EQ(s.Logprobs(two_at_inf, 3, 3, &logprob, top), 3);
  EXPECT_FLOAT_EQ(logprob, -std::log(2.0f));
  EXPECT_FLOAT_EQ(top[0].second, -std::log(2.0f));
  EXPECT_FLOAT_EQ(top[1].second, -std::log(2.0f));
  EXPECT_EQ(top[2].second, -inf);
  const std::vector<float> all_minus_inf = {-inf, -inf, -inf, -inf};
  EXPECT_FLOAT_EQ(Sampler::Logprob(all_minus_inf, 0), -std::log(4.0f));
  std::vector<std::pair<int32_t, float>> tops;
  s.TopLogprobs(all_minus_inf, 2, &tops);
  for (const auto& [id, lp] : tops) EXPECT_FLOAT_EQ(lp, -std::log(4.0f)) << id;
}

TEST(SamplerTest, RepetitionPenaltyDemotesRecentTokens) {
  Sampler s(4);
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 2.0f;
  p.repetition_last_n = 2;
  const std::vector<float> logits = {2.0f, 1.5f, -1.0f, 0.5f};
  SequenceRng rng(0);
  const std::vector<int32_t> recent_has_0 = {3, 0, 0};
  EXPECT_EQ(s.Sample(p, logits, recent_has_0, &rng), 1) << "2.0 / 2 = 1.0 < 1.5";
  const std::vector<int32_t> old_0 = {0, 3, 2};  // 0 is outside the last 2
  EXPECT_EQ(s.Sample(p, logits, old_0, &rng), 0);
  p.repetition_penalty = 1.0f;
  EXPECT_EQ(s.Sample(p, logits, recent_has_0, &rng), 0);
}

TEST(SamplerTest, TopLogprobsAreNormalisedAndOrdered) {
  Sampler s(4);
  std::vector<std::pair<int32_t, float>> top;
  s.TopLogprobs(kLogits, 3, &top);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].first, 0);
  EXPECT_EQ(top[1].first, 1);
  EXPECT_NEAR(top[0].second, std::log(0.5), 1e-5);
  EXPECT_NEAR(top[2].second, std::log(0.15), 1e-5);
  EXPECT_NEAR(Sampler::Logprob(kLogits, 3), std::log(0.05), 1e-5);
}

TEST(SamplerTest, LogprobsGiveWhatLogprobAndTopLogprobsGiveWithOneDenominator) {
  std::mt19937 gen(31);
  std::normal_distribution<float> nd(0, 3);
  std::vector<float> logits(50000);
  for (float& v : logits) v = nd(gen);
  Sampler s(static_cast<int>(logits.size()));
  for (int n : {1, 5, 20}) {
    std::vector<std::pair<int32_t, float>> want, got(n);
    s.TopLogprobs(logits, n, &want);
    float logprob = 0;
    ASSERT_EQ(s.Logprobs(logits, 123, n, &logprob, got.data()), n);
    EXPECT_EQ(logprob, Sampler::Logprob(logits, 123));
    EXPECT_EQ(got, want);
  }
  std::vector<std::pair<int32_t, float>> top(9);
  float logprob = 0;
  EXPECT_EQ(s.Logprobs(kLogits, 2, 9, &logprob, top.data()), 4) << "no more than the vocabulary";
  EXPECT_NEAR(logprob, std::log(0.15), 1e-5);
}

}  // namespace
}  // namespace kvs
