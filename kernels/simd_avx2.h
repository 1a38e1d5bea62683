// AVX2 (+FMA, F16C) vector operations for the generic SIMD kernels
// (simd_matmul.h, simd_attention.h): 8 F32 lanes per vector, and the tile
// shapes the matmul kernels use at this width (16 vector registers).
//
// Include only from translation units compiled with the AVX2 flags
// (kernels/CMakeLists.txt). Everything is in an anonymous namespace so each
// such file owns its copy (the ODR rule in cpu_features.h).
#ifndef KVSESSION_KERNELS_SIMD_AVX2_H_
#define KVSESSION_KERNELS_SIMD_AVX2_H_

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kvs {
namespace {

struct Avx2 {
  using F = __m256;
  static constexpr int kLanes = 8;
  // out[j] = the sum of v[j]'s lanes, for 8 vectors at once.
  static __m256 TransposeSum(const __m256 (&v)[8]) {
    const __m256 t0 = _mm256_hadd_ps(v[0], v[1]), t1 = _mm256_hadd_ps(v[2], v[3]);
    const __m256 t2 = _mm256_hadd_ps(v[4], v[5]), t3 = _mm256_hadd_ps(v[6], v[7]);
    const __m256 t4 = _mm256_hadd_ps(t0, t1), t5 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(t4, t5, 0x20), _mm256_permute2f128_ps(t4, t5, 0x31));
  }
  // See Avx512 for what these mean.
  static constexpr int kGemvRows = 4;
  static constexpr int kFusedMaxX = 2;
  static constexpr int kGemmRows = 2;
  static constexpr int kGemmCols = 4;

  // Lanes [0, n) set.
  static __m256i Mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }

  static F Zero() { return _mm256_setzero_ps(); }
  static F Set1(float v) { return _mm256_set1_ps(v); }
  static F Load(const float* p) { return _mm256_loadu_ps(p); }
  static F LoadPartial(const float* p, int n) { return _mm256_maskload_ps(p, Mask(n)); }
  static void Store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static void StorePartial(float* p, F v, int n) { _mm256_maskstore_ps(p, Mask(n), v); }
  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F Div(F a, F b) { return _mm256_div_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }  // a * b + c
  static float First(F v) { return _mm256_cvtss_f32(v); }

  // Sum of the lanes in a fixed order: halves, then pairs.
  static float Sum(F v) {
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
  }

  // Up to 8 uint16 values, the rest zero.
  static __m128i LoadU16Partial(const uint16_t* p, int n) {
    uint16_t buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(buf, p, static_cast<size_t>(n) * 2);
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf));
  }

  static float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }
  static F LoadF16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static F LoadF16Partial(const uint16_t* p, int n) { return _mm256_cvtph_ps(LoadU16Partial(p, n)); }
  static void StoreF16(uint16_t* p, F v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static void StoreF16Partial(uint16_t* p, F v, int n) {
    uint16_t buf[8];
    StoreF16(buf, v);
    std::memcpy(p, buf, static_cast<size_t>(n) * 2);
  }
  static F Bf16Bits(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static F LoadBf16(const uint16_t* p) {
    return Bf16Bits(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static F LoadBf16Partial(const uint16_t* p, int n) { return Bf16Bits(LoadU16Partial(p, n)); }

  // x rounded to BF16, as F32 (attention_q8_0_values.h RoundToBf16: nearest
  // even, subnormals to a zero of their sign).
  static F RoundToBf16(F x) {
    const __m256i u = _mm256_castps_si256(x);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i up = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
    const __m256i r = _mm256_and_si256(up, _mm256_set1_epi32(static_cast<int>(0xffff0000u)));
    const __m256i subnormal =
        _mm256_cmpeq_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7f800000)), _mm256_setzero_si256());
    return _mm256_castsi256_ps(
        _mm256_blendv_epi8(r, _mm256_and_si256(u, _mm256_set1_epi32(static_cast<int>(0x80000000u))), subnormal));
  }

  // 8 int8 values as floats.
  static F LoadI8(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  // float((p[i] >> shift) & 15) for 8 bytes.
  static F LoadNibbles(const uint8_t* p, int shift) {
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_cvtepi32_ps(
        _mm256_and_si256(_mm256_srl_epi32(b, _mm_cvtsi32_si128(shift)), _mm256_set1_epi32(15)));
  }
  // The six-bit values of Q6_K for 8 bytes (see Avx512::LoadQ6).
  static F LoadQ6(const uint8_t* ql, int ql_shift, const uint8_t* qh, int qh_shift) {
    const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(ql)));
    const __m256i hi = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qh)));
    const __m256i l4 = _mm256_and_si256(_mm256_srl_epi32(lo, _mm_cvtsi32_si128(ql_shift)),
                                        _mm256_set1_epi32(15));
    const __m256i h2 = _mm256_and_si256(_mm256_srl_epi32(hi, _mm_cvtsi32_si128(qh_shift)),
                                        _mm256_set1_epi32(3));
    const __m256i q = _mm256_or_si256(l4, _mm256_slli_epi32(h2, 4));
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(q, _mm256_set1_epi32(32)));
  }

  // Pieces of the vectorized exp (simd_attention.h).
  static F Min(F a, F b) { return _mm256_min_ps(a, b); }
  static F Max(F a, F b) { return _mm256_max_ps(a, b); }
  // Bit i set where lane i of a > b (or ==); false for NaN.
  static unsigned GreaterMask(F a, F b) {
    return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ)));
  }
  static unsigned EqualMask(F a, F b) {
    return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_EQ_OQ)));
  }
  static F RoundNearest(F x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // p * 2^n for integral n in [-126, 127], through the exponent bits.
  static F ScaleByPow2(F p, F n) {
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  }
};

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_SIMD_AVX2_H_
