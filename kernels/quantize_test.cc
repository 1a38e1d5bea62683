#include "kernels/quantize.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/dequantize.h"

namespace kvs {
namespace {

TEST(QuantizeTest, RoundTripErrorIsWithinHalfAStep) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> x(256), y(256);
  for (float& v : x) v = nd(rng);
  std::vector<uint8_t> buf(256 * 4);
  for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kF16, GgmlType::kBF16}) {
    QuantizeRow(t, x.data(), buf.data(), 256);
    DequantizeRow(t, buf.data(), y.data(), 256);
    for (int b = 0; b < 8; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[32 * b + j]));
      // Half a step: Q8_0 amax/254; Q4_0 up to a full step amax/8 (its range is
      // [-8, 7] steps, so a value of the opposite sign to the extreme can clip);
      // F16 and BF16 relative 2^-11 and 2^-8.
      for (int j = 0; j < 32; ++j) {
        const float v = x[32 * b + j];
        float tol = t == GgmlType::kQ8_0   ? amax / 127 * 0.51f
                    : t == GgmlType::kQ4_0 ? amax / 8 * 1.01f  // opposite-sign extremes clip at +7
                    : t == GgmlType::kF16  ? std::fabs(v) * 0x1p-11f
                                           : std::fabs(v) * 0x1p-8f;
        tol += amax * 1e-3f * (t == GgmlType::kQ8_0 || t == GgmlType::kQ4_0);  // f16 scale rounding
        EXPECT_NEAR(y[32 * b + j], v, tol) << GgmlTypeName(static_cast<uint32_t>(t)) << " " << b << "," << j;
      }
    }
  }
}

TEST(QuantizeTest, Q4_0KeepsTheExtremeExactlyAndZeroBlocks) {
  std::vector<float> x(32, 0.0f);
  x[5] = -3.0f;
  x[6] = 1.0f;
  std::vector<uint8_t> buf(34);
  std::vector<float> y(32);
  QuantizeRow(GgmlType::kQ4_0, x.data(), buf.data(), 32);
  DequantizeRow(GgmlType::kQ4_0, buf.data(), y.data(), 32);
  EXPECT_EQ(y[5], -3.0f);
  EXPECT_EQ(y[0], 0.0f);
  std::vector<float> zeros(32, 0.0f);
  QuantizeRow(GgmlType::kQ8_0, zeros.data(), buf.data(), 32);
  DequantizeRow(GgmlType::kQ8_0, buf.data(), y.data(), 32);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace kvs
