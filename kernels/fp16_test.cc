#include "kernels/fp16.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace kvs {
namespace {

TEST(Fp16Test, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Fp16ToFp32(Fp32ToFp16(f)))) << h;
      continue;
    }
    EXPECT_EQ(Fp32ToFp16(f), h) << "half 0x" << std::hex << h << " -> " << f;
  }
}

TEST(Fp16Test, KnownValues) {
  EXPECT_EQ(Fp16ToFp32(0x3c00), 1.0f);
  EXPECT_EQ(Fp16ToFp32(0xc000), -2.0f);
  EXPECT_EQ(Fp16ToFp32(0x7bff), 65504.0f);
  EXPECT_EQ(Fp16ToFp32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(Fp16ToFp32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Fp32ToFp16(1e6f), 0x7c00);                    // overflow to inf
  EXPECT_EQ(Fp32ToFp16(-1e-10f), 0x8000);                 // underflow to -0
}

TEST(Fp16Test, RoundsToNearestEven) {
  const float ulp = std::ldexp(1.0f, -10);  // spacing of halves in [1, 2)
  EXPECT_EQ(Fp32ToFp16(1.0f + ulp / 2), 0x3c00);          // tie -> even (1.0)
  EXPECT_EQ(Fp32ToFp16(1.0f + 3 * ulp / 2), 0x3c02);      // tie -> even (1 + 2ulp)
  EXPECT_EQ(Fp32ToFp16(1.0f + ulp / 2 + 1e-6f), 0x3c01);  // above the tie
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.5f, -24)), 0x0002);   // subnormal tie -> even
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.25f, -24)), 0x0001);
}

TEST(Bf16Test, ConvertsWithNearestEven) {
  EXPECT_EQ(Bf16ToFp32(0x3f80), 1.0f);
  EXPECT_EQ(Fp32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Fp32ToBf16(BitsToFloat(0x3f808000)), 0x3f80);  // tie -> even
  EXPECT_EQ(Fp32ToBf16(BitsToFloat(0x3f818000)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(Fp32ToBf16(BitsToFloat(0x3f808001)), 0x3f81);
  EXPECT_TRUE(std::isnan(Bf16ToFp32(Fp32ToBf16(std::nanf("")))));
}

}  // namespace
}  // namespace kvs
