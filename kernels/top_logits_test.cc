#include "kernels/top_logits.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/ranked_logits_test_util.h"
#include "kernels/cpu_features.h"
#include "kernels/isa_test_util.h"

namespace kvs {
namespace {

// Logits as a model gives them, plus the cases a vector loop can get wrong:
// ties (many equal values, the best repeated), infinities, NaNs, and the
// best in the tail that no whole vector covers.
std::vector<std::vector<float>> Cases() {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0, 4);
  std::vector<std::vector<float>> cases;
  for (int n : {1, 2, 7, 15, 16, 17, 31, 33, 100, 1000, 151936}) {
    std::vector<float> x(n);
    for (float& v : x) v = nd(rng);
    cases.push_back(x);
    std::vector<float> ties(n);
    for (float& v : ties) v = std::round(nd(rng) / 4);  // a handful of values, each many times
    cases.push_back(ties);
    std::vector<float> tail = x;
    tail[n - 1] = 1e30f;  // the best in the last, partial, vector
    cases.push_back(tail);
  }
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  cases.push_back({-inf, -inf, -inf});
  cases.push_back({nan, -inf, 3.0f, nan, 3.0f, inf, -0.0f, 0.0f, inf});
  cases.push_back(std::vector<float>(40, nan));
  std::vector<float> some_nan(1000);
  for (float& v : some_nan) v = nd(rng);
  for (int i = 0; i < 1000; i += 3) some_nan[i] = nan;
  cases.push_back(some_nan);
  cases.push_back(std::vector<float>(200, 0.5f));
  return cases;
}

class TopLogitsTest : public KernelIsaTest {};

INSTANTIATE_TEST_SUITE_P(Levels, TopLogitsTest,
                         ::testing::Values(KernelIsa::kScalar, KernelIsa::kAvx2, KernelIsa::kAvx512),
                         [](const ::testing::TestParamInfo<KernelIsa>& info) {
                           return std::string(KernelIsaName(info.param));
                         });

TEST_P(TopLogitsTest, ArgmaxIsTheFirstOfTheLargestAndNeverANaN) {
  ScopedKernelIsa level(GetParam());
  for (const std::vector<float>& x : Cases()) {
    const std::vector<int32_t> ranked = StableRanked(x);
    const int64_t want = ranked.empty() ? 0 : ranked[0];
    ASSERT_EQ(Argmax(x.data(), static_cast<int64_t>(x.size())), want) << "n " << x.size();
    if (std::none_of(x.begin(), x.end(), [](float v) { return std::isnan(v); })) {
      ASSERT_EQ(Argmax(x.data(), static_cast<int64_t>(x.size())), std::max_element(x.begin(), x.end()) - x.begin());
    }
  }
  EXPECT_EQ(Argmax(nullptr, 0), 0);
}

TEST_P(TopLogitsTest, TopKIsTheKBestInOrderTiesToTheSmallerIndex) {
  ScopedKernelIsa level(GetParam());
  for (const std::vector<float>& x : Cases()) {
    const std::vector<int32_t> ranked = StableRanked(x);
    for (int k : {1, 2, 5, 16, 40, 100, 1000, 200000}) {
      std::vector<TopLogit> out(k, TopLogit{-1.0f, -1});
      const int got = TopK(x.data(), static_cast<int64_t>(x.size()), k, out.data());
      ASSERT_EQ(got, std::min<int>(k, static_cast<int>(ranked.size()))) << "n " << x.size() << " k " << k;
      for (int i = 0; i < got; ++i) {
        ASSERT_EQ(out[i].id, ranked[i]) << "n " << x.size() << " k " << k << " rank " << i;
        ASSERT_TRUE(out[i].logit == x[ranked[i]]) << "rank " << i;
      }
    }
  }
  TopLogit none{};
  EXPECT_EQ(TopK(nullptr, 0, 5, &none), 0);
  EXPECT_EQ(TopK(Cases()[0].data(), 1, 0, &none), 0);
}

TEST_P(TopLogitsTest, LogitsAboveAreEveryLargerOneInIndexOrderAndStopPastTheLimit) {
  ScopedKernelIsa level(GetParam());
  for (const std::vector<float>& x : Cases()) {
    const int64_t n = static_cast<int64_t>(x.size());
    for (float floor : {-std::numeric_limits<float>::infinity(), -1.0f, 0.0f, 2.5f, 9.0f}) {
      std::vector<TopLogit> want;  // a plain loop
      for (int64_t i = 0; i < n; ++i) {
        if (x[i] > floor) want.push_back({x[i], static_cast<int32_t>(i)});
      }
      for (int max_out : {0, 1, 7, 64, 100000}) {
        std::vector<TopLogit> out(static_cast<size_t>(max_out) + 1, TopLogit{-1.0f, -1});
        const int got = LogitsAbove(x.data(), n, floor, max_out, out.data());
        const bool over = static_cast<int>(want.size()) > max_out;
        ASSERT_EQ(got, over ? max_out + 1 : static_cast<int>(want.size()))
            << "n " << n << " floor " << floor << " max_out " << max_out;
        for (int i = 0; i < std::min(got, max_out); ++i) {
          ASSERT_EQ(out[i].id, want[i].id) << "n " << n << " floor " << floor << " entry " << i;
          ASSERT_EQ(std::memcmp(&out[i].logit, &want[i].logit, sizeof(float)), 0);
        }
        EXPECT_EQ(out[max_out].id, -1) << "wrote past max_out";
      }
    }
  }
}

}  // namespace
}  // namespace kvs
