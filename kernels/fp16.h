// Scalar conversions between IEEE binary16 (F16), bfloat16 (BF16) and
// binary32. Exact and branch-light; the SIMD kernels use hardware
// conversions (F16C, AVX512-BF16) that give the same results.
#ifndef KVSESSION_KERNELS_FP16_H_
#define KVSESSION_KERNELS_FP16_H_

#include <cstdint>
#include <cstring>

namespace kvs {

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t FloatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// F16 -> F32, exact for every input (subnormals, infinities, NaNs).
inline float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) return BitsToFloat(sign | 0x7f800000u | (mant << 13));  // inf/nan
  if (exp != 0) return BitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
  // zero or subnormal: mant * 2^-24
  float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

// F32 -> F16 with round-to-nearest-even; overflow gives infinity.
inline uint16_t Fp32ToFp16(float f) {
  uint32_t x = FloatToBits(f);
  const uint32_t sign = (x >> 16) & 0x8000;
  x &= 0x7fffffff;
  if (x >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00 | (x > 0x7f800000u ? 0x200 : 0));
  }
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00);  // rounds to inf
  if (x < 0x38800000u) {  // result is subnormal or zero: round x * 2^24
    float v = BitsToFloat(x) * 16777216.0f;  // exact scaling
    // nearest-even rounding of a value < 1024 via the float adder
    float r = (v + 8388608.0f) - 8388608.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(r));
  }
  uint32_t mant_odd = (x >> 13) & 1;
  x += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round
  return static_cast<uint16_t>(sign | (x >> 13));
}

inline float Bf16ToFp32(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

// F32 -> BF16 with round-to-nearest-even; NaNs stay quiet NaNs.
inline uint16_t Fp32ToBf16(float f) {
  uint32_t x = FloatToBits(f);
  if ((x & 0x7fffffff) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace kvs

#endif  // KVSESSION_KERNELS_FP16_H_
