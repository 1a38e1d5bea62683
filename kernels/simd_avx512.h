// AVX-512 vector operations for the generic SIMD kernels (simd_matmul.h,
// simd_attention.h): 16 F32 lanes per vector, and the tile shapes the
// matmul kernels use at this width.
//
// Include only from translation units compiled with the AVX-512 flags
// (kernels/CMakeLists.txt). Everything is in an anonymous namespace so each
// such file owns its copy (the ODR rule in cpu_features.h).
#ifndef KVSESSION_KERNELS_SIMD_AVX512_H_
#define KVSESSION_KERNELS_SIMD_AVX512_H_

// GCC 12 warns that the _mm512_undefined_* placeholders inside its own
// intrinsics are uninitialized (GCC bug 105593); the warning points into
// the intrinsic headers, so silence it for them only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif

#include <cstdint>
#include <cstring>

namespace kvs {
namespace {

struct Avx512 {
  using F = __m512;
  static constexpr int kLanes = 16;
  // Exact path: up to kFusedMaxX activation rows dequantize weights in
  // registers, kGemvRows weight rows at a time; more activation rows reuse
  // kGemmRows dequantized rows from scratch in tiles of kGemmRows x kGemmCols.
  static constexpr int kGemvRows = 4;
  static constexpr int kFusedMaxX = 4;
  static constexpr int kGemmRows = 4;
  static constexpr int kGemmCols = 6;

  static __mmask16 Mask(int n) { return static_cast<__mmask16>((1u << n) - 1); }

  static F Zero() { return _mm512_setzero_ps(); }
  static F Set1(float v) { return _mm512_set1_ps(v); }
  static F Load(const float* p) { return _mm512_loadu_ps(p); }
  static F LoadPartial(const float* p, int n) { return _mm512_maskz_loadu_ps(Mask(n), p); }
  static void Store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static void StorePartial(float* p, F v, int n) { _mm512_mask_storeu_ps(p, Mask(n), v); }
  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Div(F a, F b) { return _mm512_div_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }  // a * b + c
  static float First(F v) { return _mm512_cvtss_f32(v); }
  // a * *b + c, *b broadcast by the FMA itself (VFMADD231PS m32{1to16}:
  // GCC does not fold a broadcast into an FMA whose other operands it
  // reuses, and a separate broadcast costs a decoded instruction per FMA
  // pair). Inline assembly, so ASan does not check the load.
  static F FmaBroadcast(F a, const float* b, F c) {
    asm("vfmadd231ps %[b]%{1to16%}, %[a], %[c]" : [c] "+v"(c) : [a] "v"(a), [b] "m"(*b));
    return c;
  }

  // Sum of the lanes in a fixed order: halves, then quarters, then pairs.
  static float Sum(F v) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
  }

  static float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }
  static F LoadF16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static F LoadF16Partial(const uint16_t* p, int n) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(Mask(n), p));
  }
  static void StoreF16(uint16_t* p, F v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static void StoreF16Partial(uint16_t* p, F v, int n) {
    _mm256_mask_storeu_epi16(p, Mask(n),
                             _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static F Bf16Bits(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static F LoadBf16(const uint16_t* p) {
    return Bf16Bits(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static F LoadBf16Partial(const uint16_t* p, int n) {
    return Bf16Bits(_mm256_maskz_loadu_epi16(Mask(n), p));
  }

  // x rounded to BF16, as F32 (attention_q8_0_values.h RoundToBf16: nearest
  // even, subnormals to a zero of their sign).
  static F RoundToBf16(F x) {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i up = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
    const __m512i r = _mm512_and_si512(up, _mm512_set1_epi32(static_cast<int>(0xffff0000u)));
    const __mmask16 subnormal = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000));
    return _mm512_castsi512_ps(
        _mm512_mask_and_epi32(r, subnormal, u, _mm512_set1_epi32(static_cast<int>(0x80000000u))));
  }

  // 16 int8 values as floats.
  static F LoadI8(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  // float((p[i] >> shift) & 15) for 16 bytes.
  static F LoadNibbles(const uint8_t* p, int shift) {
    const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm512_cvtepi32_ps(
        _mm512_and_si512(_mm512_srl_epi32(b, _mm_cvtsi32_si128(shift)), _mm512_set1_epi32(15)));
  }
  // float((((ql[i] >> ql_shift) & 15) | (((qh[i] >> qh_shift) & 3) << 4)) - 32)
  // for 16 bytes: the six-bit values of Q6_K.
  static F LoadQ6(const uint8_t* ql, int ql_shift, const uint8_t* qh, int qh_shift) {
    const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ql)));
    const __m512i hi = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qh)));
    const __m512i l4 = _mm512_and_si512(_mm512_srl_epi32(lo, _mm_cvtsi32_si128(ql_shift)),
                                        _mm512_set1_epi32(15));
    const __m512i h2 = _mm512_and_si512(_mm512_srl_epi32(hi, _mm_cvtsi32_si128(qh_shift)),
                                        _mm512_set1_epi32(3));
    const __m512i q = _mm512_or_si512(l4, _mm512_slli_epi32(h2, 4));
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(q, _mm512_set1_epi32(32)));
  }

  // Pieces of the vectorized exp (simd_attention.h).
  // out[j] = the sum of v[j]'s lanes, for 16 vectors at once (a transposing
  // reduction: pairs within 128-bit lanes, then across them).
  static F TransposeSum(const F (&v)[16]) {
    F s[8], u[4];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      s[k] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * k], v[2 * k + 1]),
                           _mm512_unpackhi_ps(v[2 * k], v[2 * k + 1]));
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      u[k] = _mm512_add_ps(_mm512_shuffle_ps(s[2 * k], s[2 * k + 1], 0x44),
                           _mm512_shuffle_ps(s[2 * k], s[2 * k + 1], 0xEE));
    }
    const F p01 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x44), _mm512_shuffle_f32x4(u[0], u[1], 0xEE));
    const F p23 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x44), _mm512_shuffle_f32x4(u[2], u[3], 0xEE));
    return _mm512_add_ps(_mm512_shuffle_f32x4(p01, p23, 0x88), _mm512_shuffle_f32x4(p01, p23, 0xDD));
  }
  // out[c] lane r = in[r] lane c: a 16 x 16 transpose in registers.
  static void Transpose16x16(const F (&in)[16], F (&out)[16]) {
    F t[16], u[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_ps(in[2 * i], in[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_ps(in[2 * i], in[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
      u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
      u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
      u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    // u[4i + k], 128-bit lane L: column 4L + k of rows 4i .. 4i + 3.
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const F v0 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x88), w0 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xDD);
      const F v1 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x88),
              w1 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xDD);
      out[k] = _mm512_shuffle_f32x4(v0, v1, 0x88);
      out[8 + k] = _mm512_shuffle_f32x4(v0, v1, 0xDD);
      out[4 + k] = _mm512_shuffle_f32x4(w0, w1, 0x88);
      out[12 + k] = _mm512_shuffle_f32x4(w0, w1, 0xDD);
    }
  }
  static F Min(F a, F b) { return _mm512_min_ps(a, b); }
  static F Max(F a, F b) { return _mm512_max_ps(a, b); }
  // Bit i set where lane i of a > b (or ==); false for NaN.
  static unsigned GreaterMask(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static unsigned EqualMask(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  static F RoundNearest(F x) {
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  // p * 2^n for integral n in [-126, 127].
  static F ScaleByPow2(F p, F n) { return _mm512_scalef_ps(p, n); }
};

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_SIMD_AVX512_H_
