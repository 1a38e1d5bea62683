// Dequantization checked against the GGUF block layouts: the blocks here are
// packed by hand from the layout description (quant_blocks.h), independently
// of the dequantizer's unpacking code.
#include "kernels/dequantize.h"

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/fp16.h"
#include "kernels/quant_blocks.h"

namespace kvs {
namespace {

TEST(DequantizeTest, Q8_0IsScaleTimesInt8) {
  BlockQ8_0 b[2];
  b[0].d = Fp32ToFp16(0.5f);
  b[1].d = Fp32ToFp16(-0.25f);
  for (int i = 0; i < 32; ++i) {
    b[0].qs[i] = static_cast<int8_t>(i - 16);
    b[1].qs[i] = static_cast<int8_t>(i == 0 ? -128 : 127 - i);
  }
  float out[64];
  DequantizeRow(GgmlType::kQ8_0, b, out, 64);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], 0.5f * (i - 16));
  EXPECT_EQ(out[32], -0.25f * -128);
  EXPECT_EQ(out[63], -0.25f * (127 - 31));
}

TEST(DequantizeTest, Q4_0LowNibblesFirstHalfHighNibblesSecondHalf) {
  BlockQ4_0 b;
  b.d = Fp32ToFp16(2.0f);
  int q[32];
  for (int i = 0; i < 32; ++i) q[i] = (i * 7 + 3) % 16;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
  float out[32];
  DequantizeRow(GgmlType::kQ4_0, &b, out, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], 2.0f * (q[i] - 8)) << i;
}

// Packs 8 six-bit scales and mins the way Q4_K stores them.
void PackQ4KScales(const int sc[8], const int mn[8], uint8_t out[12]) {
  std::memset(out, 0, 12);
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<uint8_t>(sc[j] & 63);
    out[j + 4] = static_cast<uint8_t>(mn[j] & 63);
  }
  for (int j = 4; j < 8; ++j) {
    out[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((mn[j] & 0xF) << 4));
    out[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
    out[j] |= static_cast<uint8_t>((mn[j] >> 4) << 6);
  }
}

TEST(DequantizeTest, Q4_KSubBlockScalesAndMins) {
  std::mt19937 rng(7);
  BlockQ4_K b;
  const float d = 0.125f, dmin = 0.0625f;
  b.d = Fp32ToFp16(d);
  b.dmin = Fp32ToFp16(dmin);
  int sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = static_cast<int>(rng() % 64);
    mn[j] = static_cast<int>(rng() % 64);
  }
  sc[7] = 63;
  mn[5] = 63;
  PackQ4KScales(sc, mn, b.scales);
  int q[256];
  for (int i = 0; i < 256; ++i) q[i] = static_cast<int>(rng() % 16);
  // Group g of 32 bytes holds sub-block 2g in low nibbles, 2g+1 in high.
  for (int g = 0; g < 4; ++g) {
    for (int l = 0; l < 32; ++l) {
      b.qs[32 * g + l] = static_cast<uint8_t>(q[64 * g + l] | (q[64 * g + 32 + l] << 4));
    }
  }
  float out[256];
  DequantizeRow(GgmlType::kQ4_K, &b, out, 256);
  for (int i = 0; i < 256; ++i) {
    const int sub = i / 32;
    EXPECT_FLOAT_EQ(out[i], d * sc[sub] * q[i] - dmin * mn[sub]) << i;
  }
}

TEST(DequantizeTest, Q6_KSixBitValuesWithInt8Scales) {
  std::mt19937 rng(11);
  BlockQ6_K b;
  std::memset(&b, 0, sizeof(b));
  const float d = 0.03125f;
  b.d = Fp32ToFp16(d);
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  int q[256];
  for (int i = 0; i < 256; ++i) q[i] = static_cast<int>(rng() % 64);
  // Each half of 128 values: 64 bytes of ql, 32 bytes of qh. Within a half,
  // value l + 32*k (k = 0..3) takes its low 4 bits from ql[l + 32*(k&1)]
  // (low nibble for k < 2, high for k >= 2) and its high 2 bits from
  // qh[l] bits 2k..2k+1.
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      for (int k = 0; k < 4; ++k) {
        const int v = q[128 * h + 32 * k + l];
        uint8_t& lo = b.ql[64 * h + l + 32 * (k & 1)];
        lo |= static_cast<uint8_t>((v & 0xF) << (k >= 2 ? 4 : 0));
        b.qh[32 * h + l] |= static_cast<uint8_t>((v >> 4) << (2 * k));
      }
    }
  }
  float out[256];
  DequantizeRow(GgmlType::kQ6_K, &b, out, 256);
  for (int i = 0; i < 256; ++i) {
    EXPECT_FLOAT_EQ(out[i], d * b.scales[i / 16] * (q[i] - 32)) << i;
  }
}

TEST(DequantizeTest, HalfFormats) {
  uint16_t h[4] = {Fp32ToFp16(1.5f), Fp32ToFp16(-3.0f), Fp32ToBf16(2.5f), Fp32ToBf16(-0.75f)};
  float out[2];
  DequantizeRow(GgmlType::kF16, h, out, 2);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -3.0f);
  DequantizeRow(GgmlType::kBF16, h + 2, out, 2);
  EXPECT_EQ(out[0], 2.5f);
  EXPECT_EQ(out[1], -0.75f);
}

}  // namespace
}  // namespace kvs
