#include "kernels/activation.h"

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

// silu(g) * up in long double.
long double Reference(float g, float up) { return g / (1.0L + std::exp(-static_cast<long double>(g))) * up; }

std::vector<float> Gates(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0, 4);
  std::vector<float> g(n);
  for (float& v : g) v = nd(rng);
  return g;
}

class SiluMulTest : public ::testing::TestWithParam<KernelIsa> {};

TEST_P(SiluMulTest, EveryLevelIsWithinFourUlpsOfTheExactValueAtEveryWidth) {
  ScopedKernelIsa level(GetParam());
  if (!level.supported()) GTEST_SKIP() << "CPU lacks this level";
  std::mt19937 rng(3);
  for (size_t n : {1, 7, 8, 15, 16, 17, 33, 3072, 3079}) {
    std::vector<float> gate = Gates(n, rng), up = Gates(n, rng);
    const std::vector<float> g0 = gate;
    SiluMul(gate.data(), up.data(), static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) {
      const long double want = Reference(g0[i], up[i]);
      const float ulp = std::abs(std::nextafter(static_cast<float>(want), INFINITY) - static_cast<float>(want));
      EXPECT_LE(std::abs(gate[i] - want), 4 * ulp + 1e-30f) << "width " << n << " i " << i << " g " << g0[i];
    }
  }
}

TEST_P(SiluMulTest, LargeNegativeGatesGiveZeroAndLargePositiveOnesPassUpThrough) {
  ScopedKernelIsa level(GetParam());
  if (!level.supported()) GTEST_SKIP() << "CPU lacks this level";
  std::vector<float> gate = {-200.0f, -90.0f, 90.0f, 200.0f, 0.0f}, up = {3.0f, 3.0f, 2.0f, 0.5f, 7.0f};
  SiluMul(gate.data(), up.data(), 5);
  EXPECT_LE(std::abs(gate[0]), 1e-30f);
  EXPECT_LE(std::abs(gate[1]), 1e-30f);
  EXPECT_EQ(gate[2], 180.0f);
  EXPECT_EQ(gate[3], 100.0f);
  EXPECT_EQ(gate[4], 0.0f);
}

TEST_P(SiluMulTest, AValueDependsOnlyOnItsOwnInputsNotOnTheWidthOrPosition) {
  ScopedKernelIsa level(GetParam());
  if (!level.supported()) GTEST_SKIP() << "CPU lacks this level";
  std::mt19937 rng(4);
  const std::vector<float> g = Gates(100, rng), u = Gates(100, rng);
  std::vector<float> whole = g;
  SiluMul(whole.data(), u.data(), 100);
  for (size_t start : {0, 3, 17, 64}) {
    for (size_t len : {1, 5, 16, 31}) {
      if (start + len > 100) continue;
      std::vector<float> part(g.begin() + start, g.begin() + start + len);
      SiluMul(part.data(), u.data() + start, static_cast<int64_t>(len));
      EXPECT_EQ(std::memcmp(part.data(), whole.data() + start, len * sizeof(float)), 0)
          << "start " << start << " len " << len;
    }
  }
}

// x + y rounded once, so every level's sum is the exact F32 addition's:
// checked against float addition written out here, at widths that leave
// every remainder of 8 and 16 lanes, and for x = y (the same buffer).
TEST_P(SiluMulTest, AddInPlaceAddsEachPairOnceAtEveryLevelAndWidth) {
  ScopedKernelIsa level(GetParam());
  if (!level.supported()) GTEST_SKIP() << "CPU lacks this level";
  std::mt19937 rng(5);
  for (size_t n : {1, 7, 8, 9, 15, 16, 17, 33, 1024, 1031}) {
    const std::vector<float> x0 = Gates(n, rng), y = Gates(n, rng);
    std::vector<float> x = x0, doubled = x0;
    AddInPlace(x.data(), y.data(), static_cast<int64_t>(n));
    AddInPlace(doubled.data(), doubled.data(), static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) {
      const volatile float sum = x0[i] + y[i];
      ASSERT_EQ(x[i], sum) << "width " << n << " i " << i;
      ASSERT_EQ(doubled[i], 2 * x0[i]) << "width " << n << " i " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, SiluMulTest, ::testing::ValuesIn(AllKernelIsas()),
                         [](const ::testing::TestParamInfo<KernelIsa>& info) {
                           return std::string(KernelIsaName(info.param));
                         });

}  // namespace
}  // namespace kvs
