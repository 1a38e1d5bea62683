#include "kernels/sort_logits.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/ranked_logits_test_util.h"

namespace kvs {
namespace {

void ExpectSortedLikeStableSort(const std::vector<float>& x) {
  const std::vector<int32_t> want = StableRanked(x);
  std::vector<TopLogit> out(x.size());
  std::vector<uint64_t> scratch(2 * x.size());
  const int n = SortLogits(x.data(), static_cast<int64_t>(x.size()), out.data(), scratch.data());
  ASSERT_EQ(n, static_cast<int>(want.size()));
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(out[i].id, want[i]) << "rank " << i << " of " << n;
    // The logit as given, bit for bit (a -0 stays -0).
    ASSERT_EQ(std::memcmp(&out[i].logit, &x[want[i]], sizeof(float)), 0) << "rank " << i;
  }
}

TEST(SortLogitsTest, GivesTheStableSortOrderOverAModelSizedVocabulary) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0, 3);
  std::vector<float> x(151936);
  for (float& v : x) v = nd(rng);
  ExpectSortedLikeStableSort(x);
}

TEST(SortLogitsTest, BreaksTiesBySmallerIndexAndTreatsBothZerosAsEqual) {
  std::mt19937 rng(6);
  std::uniform_int_distribution<int> pick(-4, 4);
  std::vector<float> x(5000);
  for (float& v : x) v = static_cast<float>(pick(rng)) * 0.5f;  // many ties
  for (size_t i = 0; i < x.size(); i += 7) x[i] = -0.0f;         // -0 among the +0s
  ExpectSortedLikeStableSort(x);
}

TEST(SortLogitsTest, PlacesInfinitiesAndSubnormalsAndLeavesNaNOut) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny = std::numeric_limits<float>::denorm_min();
  ExpectSortedLikeStableSort({1.0f, nan, -inf, inf, tiny, -tiny, 0.0f, -0.0f, nan, inf, -3.5f,
                              std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest()});
  ExpectSortedLikeStableSort({nan, nan, nan});
  ExpectSortedLikeStableSort({});
  ExpectSortedLikeStableSort({2.0f});
}

TEST(SortLogitsTest, KeysThatShareDigitsKeepIndexOrder) {
  // Every key equal, and keys that differ only in their lowest or highest
  // digit: the passes over a constant digit are skipped, and must not
  // disturb the order the others leave.
  ExpectSortedLikeStableSort(std::vector<float>(3000, 1.25f));
  std::vector<float> low(3000), high(3000);
  for (int i = 0; i < 3000; ++i) {
    low[i] = std::nextafter(1.0f, 2.0f * static_cast<float>(i % 5));  // last bits differ
    high[i] = (i % 3 == 0) ? -8.0f : 8.0f;                               // sign and exponent differ
  }
  ExpectSortedLikeStableSort(low);
  ExpectSortedLikeStableSort(high);
}

}  // namespace
}  // namespace kvs
