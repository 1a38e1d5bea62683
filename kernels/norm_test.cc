#include "kernels/norm.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu_features.h"
#include "kernels/isa_test_util.h"

namespace kvs {
namespace {

// x / sqrt(mean(x^2) + eps) * w, every step in long double.
std::vector<float> Reference(const std::vector<float>& x, const std::vector<float>& w, float eps) {
  long double sum = 0;
  for (float v : x) sum += static_cast<long double>(v) * v;
  const long double scale = 1.0L / std::sqrt(sum / x.size() + eps);
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(x[i] * scale * w[i]);
  return out;
}

TEST(RmsNormTest, EveryWidthMatchesALongDoubleReferenceToTwoUlps) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0, 3);
  for (int64_t n : {1, 2, 7, 8, 9, 15, 16, 17, 128, 1000, 1024, 4096, 4099}) {
    std::vector<float> x(n), w(n), out(n);
    for (float& v : x) v = nd(rng);
    for (float& v : w) v = 1 + nd(rng) / 10;
    RmsNorm(x.data(), w.data(), 1e-6f, n, out.data());
    const std::vector<float> ref = Reference(x, w, 1e-6f);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(out[i], ref[i], 2 * std::abs(std::nextafter(ref[i], 2 * ref[i]) - ref[i]))
          << "width " << n << " value " << i;
    }
  }
}

TEST(RmsNormTest, NormalisesInPlaceAndWithoutWeightsToTheSameBits) {
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0, 1);
  const int64_t n = 1027;
  std::vector<float> x(n), ones(n, 1.0f), weighted(n), plain(n);
  for (float& v : x) v = nd(rng);
  RmsNorm(x.data(), ones.data(), 1e-5f, n, weighted.data());
  RmsNorm(x.data(), nullptr, 1e-5f, n, plain.data());
  RmsNorm(x.data(), ones.data(), 1e-5f, n, x.data());
  EXPECT_EQ(std::memcmp(weighted.data(), plain.data(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(weighted.data(), x.data(), n * sizeof(float)), 0);
}

TEST(RmsNormTest, AZeroRowStaysZeroAndEpsKeepsItFinite) {
  std::vector<float> x(64, 0.0f), out(64, 1.0f);
  RmsNorm(x.data(), nullptr, 1e-6f, 64, out.data());
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

// The per-level norms against the scalar level's bits: with and without
// weights, into another buffer and in place, at widths that leave every
// remainder of the 8 double sums and of the 8 and 16 float lanes.
class RmsNormLevelTest : public KernelIsaTest {};

TEST_P(RmsNormLevelTest, EveryLevelGivesTheScalarLevelsBitsAtEveryWidth) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0, 2);
  for (int64_t n : {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 128, 1000, 1024, 3072, 4099}) {
    std::vector<float> x(n), w(n);
    for (float& v : x) v = nd(rng);
    for (float& v : w) v = 1 + nd(rng) / 10;
    for (const float* weight : {static_cast<const float*>(w.data()), static_cast<const float*>(nullptr)}) {
      std::vector<float> want(n), got(n), in_place = x;
      {
        ScopedKernelIsa scalar(KernelIsa::kScalar);
        RmsNorm(x.data(), weight, 1e-6f, n, want.data());
      }
      ScopedKernelIsa level(GetParam());
      RmsNorm(x.data(), weight, 1e-6f, n, got.data());
      RmsNorm(in_place.data(), weight, 1e-6f, n, in_place.data());
      ASSERT_EQ(std::memcmp(want.data(), got.data(), n * sizeof(float)), 0)
          << KernelIsaName(GetParam()) << ", width " << n << (weight ? ", weighted" : ", plain");
      ASSERT_EQ(std::memcmp(want.data(), in_place.data(), n * sizeof(float)), 0)
          << KernelIsaName(GetParam()) << ", width " << n << " in place";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, RmsNormLevelTest, ::testing::ValuesIn(AllKernelIsas()),
                         [](const auto& info) { return std::string(KernelIsaName(info.param)); });

}  // namespace
}  // namespace kvs
