#include "kernels/softmax_denominator.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu_features.h"
#include "kernels/isa_test_util.h"

namespace kvs {
namespace {

// Units in the last place between two positive doubles.
int64_t UlpsApart(double a, double b) {
  int64_t ia, ib;
  std::memcpy(&ia, &a, sizeof ia);
  std::memcpy(&ib, &b, sizeof ib);
  return ia > ib ? ia - ib : ib - ia;
}

TEST(ExpOfNonPositiveTest, IsWithinTwoUlpOfStdExpDownToTheCutoff) {
  std::mt19937_64 gen(3);
  std::uniform_real_distribution<double> wide(-708.0, 0.0), narrow(-2.0, 0.0);
  int64_t worst = 0;
  for (int i = 0; i < 200000; ++i) {
    const double d = i % 2 == 0 ? wide(gen) : narrow(gen);
    const int64_t ulps = UlpsApart(ExpOfNonPositive(d), std::exp(d));
    worst = ulps > worst ? ulps : worst;
  }
  EXPECT_LE(worst, 2);
  EXPECT_EQ(ExpOfNonPositive(0.0), 1.0);
  EXPECT_EQ(ExpOfNonPositive(-0.0), 1.0);
  EXPECT_LE(UlpsApart(ExpOfNonPositive(-1.0), std::exp(-1.0)), 1);
  EXPECT_GT(ExpOfNonPositive(-708.0), 0.0);
  EXPECT_LE(UlpsApart(ExpOfNonPositive(-708.0), std::exp(-708.0)), 2);
}

TEST(ExpOfNonPositiveTest, IsZeroBelowTheCutoffAndForMinusInfinity) {
  EXPECT_EQ(ExpOfNonPositive(-708.0001), 0.0);
  EXPECT_EQ(ExpOfNonPositive(-1e300), 0.0);
  EXPECT_EQ(ExpOfNonPositive(-std::numeric_limits<double>::infinity()), 0.0);
  EXPECT_EQ(ExpOfNonPositive(std::numeric_limits<double>::quiet_NaN()), 0.0);
}

// Logits as a model gives them, with NaNs, infinities, both zeros, values
// far below the max and lengths that leave every tail of a group of 8.
std::vector<std::vector<float>> Cases() {
  std::mt19937 gen(7);
  std::normal_distribution<float> nd(0, 4);
  std::vector<std::vector<float>> cases;
  for (int n : {1, 2, 7, 8, 9, 15, 17, 64, 1000, 151936}) {
    std::vector<float> x(n);
    for (float& v : x) v = nd(gen);
    cases.push_back(x);
  }
  std::vector<float> odd(1003);
  for (size_t i = 0; i < odd.size(); ++i) odd[i] = nd(gen) * (i % 5 == 0 ? 300.0f : 1.0f);  // some below e^-708
  odd[3] = std::numeric_limits<float>::quiet_NaN();
  odd[10] = -std::numeric_limits<float>::infinity();
  odd[11] = -0.0f;
  odd[12] = 0.0f;
  odd[1002] = std::numeric_limits<float>::quiet_NaN();
  cases.push_back(odd);
  return cases;
}

float MaxOf(const std::vector<float>& x) {
  float m = -std::numeric_limits<float>::infinity();
  for (float v : x) m = v > m ? v : m;
  return m;
}

// The definition of softmax_denominator.h, written plainly.
double Denominator(const std::vector<float>& x, float max) {
  double p[8] = {};
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) continue;
    p[i % 8] += ExpOfNonPositive(static_cast<double>(x[i] - max));
  }
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

class SoftmaxDenominatorTest : public KernelIsaTest {};

INSTANTIATE_TEST_SUITE_P(Levels, SoftmaxDenominatorTest, ::testing::ValuesIn(AllKernelIsas()),
                         [](const auto& info) { return std::string(KernelIsaName(info.param)); });

TEST_P(SoftmaxDenominatorTest, EveryLevelGivesTheDefinitionsBits) {
  ScopedKernelIsa level(GetParam());
  for (const std::vector<float>& x : Cases()) {
    const float max = MaxOf(x);
    const double got = SoftmaxDenominator(x.data(), static_cast<int64_t>(x.size()), max);
    const double want = Denominator(x, max);
    ASSERT_EQ(std::memcmp(&got, &want, sizeof got), 0) << "n " << x.size() << ": " << got << " vs " << want;
  }
  EXPECT_EQ(SoftmaxDenominator(nullptr, 0, 0.0f), 0.0);
}

TEST_P(SoftmaxDenominatorTest, IsTheSoftmaxDenominatorToDoublePrecision) {
  ScopedKernelIsa level(GetParam());
  for (const std::vector<float>& x : Cases()) {
    const float max = MaxOf(x);
    long double exact = 0;  // std::exp, summed in extended precision
    for (float v : x) {
      if (!std::isnan(v)) exact += std::exp(static_cast<long double>(v - max));
    }
    const double got = SoftmaxDenominator(x.data(), static_cast<int64_t>(x.size()), max);
    EXPECT_NEAR(got, static_cast<double>(exact), 1e-14 * static_cast<double>(exact)) << "n " << x.size();
    EXPECT_GE(got, 1.0) << "the max itself weighs 1";
  }
}

}  // namespace
}  // namespace kvs
