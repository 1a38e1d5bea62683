#include "kernels/rope.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace kvs {
namespace {

TEST(RopeTest, AdjacentAndNeoxRotateDifferentPairs) {
  const int head_dim = 8, rope_dim = 8;
  std::vector<float> inv_freq(rope_dim / 2);
  for (int i = 0; i < rope_dim / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / rope_dim);
  float cs[8];
  RopeAngles(3, inv_freq.data(), rope_dim, cs);
  float adj[8], neox[8];
  for (int i = 0; i < 8; ++i) adj[i] = neox[i] = static_cast<float>(i + 1);
  RopeApply(RopeStyle::kAdjacent, adj, 1, head_dim, rope_dim, cs);
  RopeApply(RopeStyle::kNeox, neox, 1, head_dim, rope_dim, cs);
  // Adjacent: pair 0 is (x0, x1) turned by 3 * inv_freq[0] = 3 radians.
  EXPECT_NEAR(adj[0], 1 * std::cos(3.0) - 2 * std::sin(3.0), 1e-5);
  EXPECT_NEAR(adj[1], 1 * std::sin(3.0) + 2 * std::cos(3.0), 1e-5);
  // NEOX: pair 0 is (x0, x4).
  EXPECT_NEAR(neox[0], 1 * std::cos(3.0) - 5 * std::sin(3.0), 1e-5);
  EXPECT_NEAR(neox[4], 1 * std::sin(3.0) + 5 * std::cos(3.0), 1e-5);
}

TEST(RopeTest, PositionZeroIsIdentityAndRotationKeepsNorms) {
  const int head_dim = 16, rope_dim = 12;  // last 4 values pass through
  std::vector<float> inv_freq(rope_dim / 2, 0.5f);
  float cs[12];
  RopeAngles(0, inv_freq.data(), rope_dim, cs);
  std::vector<float> x(2 * head_dim);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i));
  std::vector<float> y = x;
  RopeApply(RopeStyle::kNeox, y.data(), 2, head_dim, rope_dim, cs);
  EXPECT_EQ(x, y);
  RopeAngles(1000, inv_freq.data(), rope_dim, cs);
  RopeApply(RopeStyle::kAdjacent, y.data(), 2, head_dim, rope_dim, cs);
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < rope_dim / 2; ++i) {
      float* a = &x[h * head_dim + 2 * i];
      float* b = &y[h * head_dim + 2 * i];
      EXPECT_NEAR(a[0] * a[0] + a[1] * a[1], b[0] * b[0] + b[1] * b[1], 1e-5);
    }
    for (int i = rope_dim; i < head_dim; ++i) EXPECT_EQ(x[h * head_dim + i], y[h * head_dim + i]);
  }
}

}  // namespace
}  // namespace kvs
