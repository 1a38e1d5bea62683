// How attention folds the values of a Q8_0 KV cache: the weighted sum
// acc += p_j * v_j of the online softmax. Two arithmetics, one per kernel
// level (KernelTable::q8_0_value_groups says which the active level uses);
// within a level every kernel and path uses the same one.
//
// For a query's probability p_j = e^(score_j - max) of key j, and key j's
// value row of q8_0 blocks (an F16 scale s_jb and 32 int8 quants q_jd per
// block b), x_jb = p_j * s_jb in F32.
//
// BF16 weights (scalar, AVX2, AVX-512 without BF16, AMX):
//   w_jb = Q8_0ValueWeight(p_j, s_jb): x_jb rounded to BF16 (nearest even;
//          an F32 subnormal becomes a zero of its sign, as VCVTNEPS2BF16
//          does);
//   acc_d += w_jb * q_jd for every d of block b: the product is exact in
//          F32 (8 by 8 significant bits), so each key adds one rounding.
// Keys are added in order. The levels differ in summation order only
// (about 1e-6 relative).
//
// Int16 groups (AVX-512 with AVX512-BF16 and AVX512-VNNI: VPDPWSSD). The
// keys of a page (KV block) go in groups of kQ8_0ValueGroupKeys: keys
// [16g, 16g + 16) of the page, those the query sees. Per group and value
// block b, Q8_0GroupWeights: m = max_j |x_jb|, w_jb = x_jb * (32767 / m)
// rounded to the nearest int16 (ties to even), step_b = m / 32767; then
//   acc_d = fma(float(S_d), step_b, acc_d), S_d = sum_j w_jb * q_jd
// once per group, S_d an exact int32 (at most 16 * 32767 * 128 < 2^31), so
// the order within a group does not matter. Groups are added in order. A
// group with m below kQ8_0GroupMinMax (2^-96; 32767 / m would overflow F32
// for subnormal m) gets zero weights and step 0: it adds fma(0, 0, acc) =
// acc, at most 16 * 127 * 2^-96 short of its exact sum.
//
// The sum of the probabilities (the softmax's denominator) stays F32 and
// unrounded in both. Every kernel of a level makes the same groups (or
// rounds the same weights), so prefill's tiles, a decode row, forks
// sharing blocks and the per-query kernel keep the same bits. Heads of a
// size without a fixed kernel (the fallback) take BF16 weights at every
// level.
//
// Precision: BF16 keeps 8 significant bits of the weight (relative error at
// most 2^-8), below a Q8_0 value's own rounding (half a step of max|v|/127
// per block); int16 groups keep each weight within m / 65534 of x. On the
// reference models the mean KL against the f16 cache moved by at most 2%
// with BF16 weights; int16 groups bring it to llama.cpp's own q8_0 figure
// (docs/performance.md, "KV types" and "Q8_0 values in int16 groups").
//
// Contract: pure, header-only, thread-safe.
#ifndef KVSESSION_KERNELS_ATTENTION_Q8_0_VALUES_H_
#define KVSESSION_KERNELS_ATTENTION_Q8_0_VALUES_H_

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kvs {

// F32 -> the F32 value of its BF16 rounding: nearest even, F32 subnormals
// to a zero of their sign (VCVTNEPS2BF16's rule). x must be finite.
inline float RoundToBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0) {
    u &= 0x80000000u;
  } else {
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  }
  float r;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

// The weight of a q8_0 value block: probability p times the block's scale
// (already F32), rounded to BF16.
inline float Q8_0ValueWeight(float p, float block_scale) { return RoundToBf16(p * block_scale); }

// Keys per group of the int16 contract (the first key of a group is a
// multiple of this, counted from the page's first key).
inline constexpr int kQ8_0ValueGroupKeys = 16;

// The largest int16 weight of a group.
inline constexpr float kQ8_0GroupWeightMax = 32767.0f;

// A group's largest |x| below this counts as zero.
inline constexpr float kQ8_0GroupMinMax = 0x1p-96f;

// The int16 weights of one group and value block: x[0, n) the group's
// p_j * s_jb (F32 products, finite), w[0, n) their weights; returns
// step_b. m < kQ8_0GroupMinMax gives zero weights and step 0.
inline float Q8_0GroupWeights(const float* x, int n, int16_t* w) {
  float m = 0.0f;
  for (int j = 0; j < n; ++j) m = std::fabs(x[j]) > m ? std::fabs(x[j]) : m;
  if (m < kQ8_0GroupMinMax) {
    for (int j = 0; j < n; ++j) w[j] = 0;
    return 0.0f;
  }
  const float r = kQ8_0GroupWeightMax / m;
  for (int j = 0; j < n; ++j) w[j] = static_cast<int16_t>(std::nearbyint(x[j] * r));
  return m / kQ8_0GroupWeightMax;
}

}  // namespace kvs

#endif  // KVSESSION_KERNELS_ATTENTION_Q8_0_VALUES_H_
