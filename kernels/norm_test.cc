#include "kernels/norm.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace kvs
