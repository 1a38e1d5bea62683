// AVX-512 vector operations plus AVX512-BF16's pair products, for the
// attention kernels' Q8_0 values (simd_attention_q8_0_values.h): where
// Avx512Bf16 is the vector type, value keys go two at a time through
// VDPBF16PS (kBf16Dot).
//
// Include only from translation units compiled with the AVX-512 and
// AVX512-BF16 flags (kernels/CMakeLists.txt); anonymous namespace, as
// simd_avx512.h.
#ifndef KVSESSION_KERNELS_SIMD_AVX512_BF16_H_
#define KVSESSION_KERNELS_SIMD_AVX512_BF16_H_

#include <cstdint>
#include <cstring>

#include "kernels/simd_avx512.h"

namespace kvs {
namespace {

struct Avx512Bf16 : Avx512 {
  static constexpr bool kBf16Dot = true;
  // 16 lanes of two BF16 values: (key 2i's value, key 2i + 1's value).
  using Pairs = __m512i;

  // The BF16 bits of x's 16 lanes (nearest even, subnormals to zero:
  // VCVTNEPS2BF16, the rule of attention_q8_0_values.h) at p[0, 16).
  static void StoreBf16(uint16_t* p, F x) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x)));
  }
  // Lane i: (even[i], odd[i]) as BF16 (exact for int8); odd == nullptr
  // gives zeros in the odd halves.
  static Pairs PairLanes(const int8_t* even, const int8_t* odd) {
    const __m512i e = _mm512_castps_si512(LoadI8(even));
    const __m512i o = odd != nullptr ? _mm512_castps_si512(LoadI8(odd)) : _mm512_setzero_si512();
    return _mm512_mask_blend_epi16(0xAAAAAAAAu, _mm512_srli_epi32(e, 16), o);
  }
  static void StorePairs(float* p, Pairs v) { _mm512_storeu_si512(p, v); }
  static Pairs LoadPairs(const float* p) { return _mm512_loadu_si512(p); }
  // Two keys' weights (BF16 bits, the even key in the low half) in every
  // lane.
  static Pairs BroadcastPair(const uint16_t* weights) {
    int32_t pair;
    std::memcpy(&pair, weights, sizeof pair);
    return _mm512_set1_epi32(pair);
  }
  // acc + the two products of each lane (VDPBF16PS).
  static F DotPairs(F acc, Pairs v, Pairs w) {
    return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(v), reinterpret_cast<__m512bh>(w));
  }
};

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_SIMD_AVX512_BF16_H_
