// AVX-512 vector operations of the level's attention kernels: Avx512 and
// the Q8_0 values in int16 groups (attention_q8_0_values.h,
// simd_attention_q8_0_values.h), value keys two at a time through
// AVX512-VNNI's VPDPWSSD (kInt16Groups). The AVX-512 level requires
// AVX512-VNNI (cpu_features.h), so every CPU that runs it, with or without
// AVX512-BF16 or AMX, folds its values this way.
//
// Include only from translation units compiled with the AVX-512 flags
// (kernels/CMakeLists.txt); anonymous namespace, as simd_avx512.h.
#ifndef KVSESSION_KERNELS_SIMD_AVX512_INT16_GROUPS_H_
#define KVSESSION_KERNELS_SIMD_AVX512_INT16_GROUPS_H_

#include <cstdint>
#include <cstring>

#include "kernels/attention_q8_0_values.h"
#include "kernels/simd_avx512.h"

namespace kvs {
namespace {

struct Avx512Int16Groups : Avx512 {
  // Q8_0 values in int16 groups (attention_q8_0_values.h), two keys at a
  // time by VPDPWSSD.
  static constexpr bool kInt16Groups = true;
  // 16 lanes of two int16 values: (key 2i's value, key 2i + 1's value).
  using Pairs = __m512i;

  // A q8_0 block's 32 values of two keys as two vectors of int16 pairs
  // (even key low): `first` holds values 0-7 and 16-23 in its lanes 0-15,
  // `second` values 8-15 and 24-31 (the byte unpacks' own order: two loads,
  // two unpacks, two widenings per block). odd == nullptr gives zeros in
  // the odd halves. FlushBlockSums puts the values back in order.
  static void PairBlock(const int8_t* even, const int8_t* odd, Pairs& first, Pairs& second) {
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(even));
    const __m256i o =
        odd != nullptr ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(odd)) : _mm256_setzero_si256();
    first = _mm512_cvtepi8_epi16(_mm256_unpacklo_epi8(e, o));
    second = _mm512_cvtepi8_epi16(_mm256_unpackhi_epi8(e, o));
  }
  static void StorePairs(float* p, Pairs v) { _mm512_storeu_si512(p, v); }
  static Pairs LoadPairs(const float* p) { return _mm512_loadu_si512(p); }
  // Two keys' int16 weights (the even key in the low half) in every lane.
  static Pairs BroadcastPair(const int16_t* weights) {
    int32_t pair;
    std::memcpy(&pair, weights, sizeof pair);
    return _mm512_set1_epi32(pair);
  }
  static Pairs ZeroSums() { return _mm512_setzero_si512(); }
  // sums + the two products of each lane, exact in int32 (VPDPWSSD).
  static Pairs DotPairs(Pairs sums, Pairs v, Pairs w) { return _mm512_dpwssd_epi32(sums, v, w); }
  // A block's flush: acc[0, 32) = fma(float(sum), step, acc) for the int32
  // sums of PairBlock's two vectors, put back in the values' order.
  static void FlushBlockSums(float* acc, Pairs first, Pairs second, float step) {
    const F s = _mm512_set1_ps(step);
    const __m512i low = _mm512_shuffle_i64x2(first, second, 0x44);   // values 0-15
    const __m512i high = _mm512_shuffle_i64x2(first, second, 0xee);  // values 16-31
    _mm512_storeu_ps(acc, _mm512_fmadd_ps(_mm512_cvtepi32_ps(low), s, _mm512_loadu_ps(acc)));
    _mm512_storeu_ps(acc + 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(high), s, _mm512_loadu_ps(acc + 16)));
  }
  // A run of groups with the accumulators in registers (ValueSpanTileQ8_0):
  // acc[0, 32) as PairBlock's two vectors (values 0-7 and 16-23, then 8-15
  // and 24-31), and back.
  static void LoadBlockAcc(const float* acc, F& first, F& second) {
    const F low = _mm512_loadu_ps(acc), high = _mm512_loadu_ps(acc + 16);
    first = _mm512_shuffle_f32x4(low, high, 0x44);
    second = _mm512_shuffle_f32x4(low, high, 0xee);
  }
  static void StoreBlockAcc(float* acc, F first, F second) {
    _mm512_storeu_ps(acc, _mm512_shuffle_f32x4(first, second, 0x44));
    _mm512_storeu_ps(acc + 16, _mm512_shuffle_f32x4(first, second, 0xee));
  }
  // sums + v . the two int16 weights at `weights` in every lane: DotPairs
  // with VPDPWSSD's embedded broadcast (one fused load; GCC 12 keeps
  // _mm512_set1_epi32 of a load as a separate VPBROADCASTD). Inline
  // assembly on a copy, as DotSlice in packed_q8_0_avx512.cc.
  static void DotPairsAt(Pairs& sums, Pairs v, const int16_t* weights) {
    Pairs s = sums;
    asm("vpdpwssd %[w]%{1to16%}, %[v], %[s]"
        : [s] "+v"(s)
        : [v] "v"(v), [w] "m"(*reinterpret_cast<const int32_t*>(weights)));
    sums = s;
  }
  // acc = fma(float(sums), step, acc) lane by lane: FlushBlockSums' step
  // for accumulators in PairBlock's order (the same bits).
  static void FlushSums(F& acc, Pairs sums, float step) {
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_set1_ps(step), acc);
  }
  // Key t's int16 weight of value block b within a query's chunk weights
  // (StoreGroupWeights' layout: blocks 2k and 2k + 1 share 32 weights from
  // 32k, their keys [4i, 4i + 4) at 8i, block 2k's then block 2k + 1's;
  // VPACKSSDW's order). A pair's two weights are adjacent.
  static constexpr int WeightIndex(int b, int t) { return b / 2 * 32 + b % 2 * 4 + t / 4 * 8 + t % 4; }
  // Weights a query's chunk holds for kBlocks value blocks.
  static constexpr int ChunkWeights(int blocks) { return (blocks + 1) / 2 * 32; }

  // In 128-bit lane i, every lane holds the largest of a[i]'s 16 lanes.
  static F MaxOfFour(const F (&a)[4]) {
    // Halves folded: t holds a0's 16 lanes folded to 8 (low 256 bits) and
    // a1's (high); u a2's and a3's.
    const F t = _mm512_max_ps(_mm512_shuffle_f32x4(a[0], a[1], 0x44), _mm512_shuffle_f32x4(a[0], a[1], 0xee));
    const F u = _mm512_max_ps(_mm512_shuffle_f32x4(a[2], a[3], 0x44), _mm512_shuffle_f32x4(a[2], a[3], 0xee));
    // Lane i: a[i]'s lanes folded to 4, then to 1 (broadcast in the lane).
    F v = _mm512_max_ps(_mm512_shuffle_f32x4(t, u, 0x88), _mm512_shuffle_f32x4(t, u, 0xdd));
    v = _mm512_max_ps(v, _mm512_permute_ps(v, 0x4e));
    return _mm512_max_ps(v, _mm512_permute_ps(v, 0xb1));
  }
  // Lane i's value in every lane.
  static F LaneOf(F v, int i) { return _mm512_permutexvar_ps(_mm512_set1_epi32(4 * i), v); }

  // One group's scales for up to four value blocks, scaled
  // (Q8_0GroupScales, block by block): s[b] holds block b's 16 keys'
  // scales (zero past the group's keys) for b < n and becomes its scaled
  // scales; block b's step goes to steps[b]. The four maxima are reduced
  // together; the powers of two come from their exponent bits.
  static void ScaleGroupScales(F* s, int n, float* steps) {
    F a[4];
    for (int b = 0; b < 4; ++b) a[b] = b < n ? _mm512_abs_ps(s[b]) : _mm512_setzero_ps();
    const F v = MaxOfFour(a);
    const __mmask16 scaled = _mm512_cmp_ps_mask(v, _mm512_set1_ps(kQ8_0GroupMinMax), _CMP_GE_OQ);
    // S = 2^e * f (1 <= f < 2, S >= 2^-96: normal) has biased exponent
    // e + 127; 2^(13 - e) has 267 - (e + 127), the step 2^(e - 13)
    // (e + 127) - 13.
    const __m512i biased = _mm512_srli_epi32(_mm512_castps_si512(v), 23);
    const __m512i top = _mm512_set1_epi32(kQ8_0GroupScaleExponent);
    const F up = _mm512_castsi512_ps(
        _mm512_maskz_slli_epi32(scaled, _mm512_sub_epi32(_mm512_add_epi32(top, _mm512_set1_epi32(254)), biased), 23));
    const F step = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(scaled, _mm512_sub_epi32(biased, top), 23));
    for (int b = 0; b < n; ++b) s[b] = _mm512_mul_ps(s[b], LaneOf(up, b));
    // Lanes 0, 4, 8, 12 (the blocks' steps) to steps[0, n).
    const F firsts = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), step);
    _mm512_mask_storeu_ps(steps, Mask(n), firsts);
  }

  // The weights of up to four queries for one group (Q8_0GroupWeights,
  // block by block): p[q] query q's probabilities of the group's keys
  // (each in [0, 1], zero past them) for q < nq; scaled[b] and
  // scale_steps[b] block b's scaled scales and their step
  // (ScaleGroupScales) for b < kBlocks. Query q's int16 weights go to
  // w[q] (ChunkWeights(kBlocks) of them, at WeightIndex) and block b's step
  // to steps[q][b]. The four maxima are reduced together; a query whose
  // largest is below 2^-96 gets zeros by a mask.
  template <int kBlocks>
  static void StoreGroupWeights(const F* p, int nq, const float (*scaled)[16], const float* scale_steps,
                                int16_t* const* w, float* const* steps) {
    F a[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) a[q] = q < nq ? p[q] : _mm512_setzero_ps();
    const F v = MaxOfFour(a);
    const __mmask16 kept = _mm512_cmp_ps_mask(v, _mm512_set1_ps(kQ8_0GroupMinMax), _CMP_GE_OQ);
    // P = 2^e * f: 2^-e has biased exponent 254 - (e + 127), 2^e e + 127.
    const __m512i biased = _mm512_srli_epi32(_mm512_castps_si512(v), 23);
    const F down =
        _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kept, _mm512_sub_epi32(_mm512_set1_epi32(254), biased), 23));
    const F unit = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kept, biased, 23));
    const F block_steps = _mm512_maskz_loadu_ps(Mask(kBlocks), scale_steps);
#pragma GCC unroll 4
    for (int q = 0; q < nq; ++q) {
      const F normalized = _mm512_mul_ps(p[q], LaneOf(down, q));
#pragma GCC unroll 4
      for (int k = 0; k < (kBlocks + 1) / 2; ++k) {
        const __m512i even = _mm512_cvtps_epi32(_mm512_mul_ps(normalized, _mm512_loadu_ps(scaled[2 * k])));
        const __m512i odd = 2 * k + 1 < kBlocks
                                ? _mm512_cvtps_epi32(_mm512_mul_ps(normalized, _mm512_loadu_ps(scaled[2 * k + 1])))
                                : _mm512_setzero_si512();
        _mm512_storeu_si512(w[q] + 32 * k, _mm512_packs_epi32(even, odd));  // saturating
      }
      _mm512_mask_storeu_ps(steps[q], Mask(kBlocks), _mm512_mul_ps(LaneOf(unit, q), block_steps));
    }
  }
};

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_SIMD_AVX512_INT16_GROUPS_H_
