// How attention folds the values of a Q8_0 KV cache: the weighted sum
// acc += p_j * v_j of the online softmax. Two arithmetics, one per kernel
// level (KernelTable::q8_0_value_groups says which the active level uses);
// within a level every kernel and path uses the same one.
//
// For a query's probability p_j = e^(score_j - max) of key j, and key j's
// value row of q8_0 blocks (an F16 scale s_jb and 32 int8 quants q_jd per
// block b), x_jb = p_j * s_jb in F32.
//
// BF16 weights (scalar, AVX2, AMX):
//   w_jb = Q8_0ValueWeight(p_j, s_jb): x_jb rounded to BF16 (nearest even;
//          an F32 subnormal becomes a zero of its sign, as VCVTNEPS2BF16
//          does);
//   acc_d += w_jb * q_jd for every d of block b: the product is exact in
//          F32 (8 by 8 significant bits), so each key adds one rounding.
// Keys are added in order. The levels differ in summation order only
// (about 1e-6 relative).
//
// Int16 groups (AVX-512, which requires AVX512-VNNI: VPDPWSSD). The
// keys of a page (KV block) go in groups of kQ8_0ValueGroupKeys: keys
// [16g, 16g + 16) of the page, those the query sees. Per group, with
// e(m) = floor(log2 m):
//   the query's probabilities are normalized by the power of two of their
//     largest, P: p'_j = p_j * 2^-e(P), in [0, 2) (Q8_0GroupProbabilities);
//   each value block b's scales by that of theirs, S_b = max_j |s_jb|:
//     s'_jb = s_jb * 2^(13 - e(S_b)), in (-2^14, 2^14) (Q8_0GroupScales;
//     shared by every query that sees the same keys);
//   w_jb = p'_j * s'_jb (one F32 rounding) rounded to the nearest int16
//     (ties to even; 2^15 saturates to 32767), with the step
//     step_b = 2^(e(P) + e(S_b) - 13) (Q8_0GroupWeights);
//   acc_d = fma(float(S_d), step_b, acc_d), S_d = sum_j w_jb * q_jd
// once per group, S_d an exact int32 (at most 16 * 32767 * 128 < 2^31), so
// the order within a group does not matter. Groups are added in order.
// Every scaling is by a power of two, so no division is needed and w_jb is
// p_j * s_jb / step_b rounded once, then to an integer. A P or S_b below
// kQ8_0GroupMinMax (2^-96) counts as zero: zero weights and step 0, which
// add fma(0, 0, acc) = acc, at most 16 * 127 * 2^-96 short of the exact
// sum.
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
// per block); an int16 weight lies within a step of p_j * s_jb / step_b
// (half a step unless it saturates), a step being at most P * S_b / 2^13.
// On the reference models the mean KL against the f16 cache moved by at most 2%
// with BF16 weights; int16 groups bring it to llama.cpp's own q8_0 figure
// (docs/performance/kv-types.md, "KV types" and "Q8_0 values in int16 groups").
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

// Scaled scales s' lie in (-2^(this + 1), 2^(this + 1)).
inline constexpr int kQ8_0GroupScaleExponent = 13;

// A group's largest probability or |scale| below this counts as zero.
inline constexpr float kQ8_0GroupMinMax = 0x1p-96f;

// The largest |x| of x[0, n) (0 for n = 0).
inline float Q8_0GroupMaxAbs(const float* x, int n) {
  float m = 0.0f;
  for (int j = 0; j < n; ++j) m = std::fabs(x[j]) > m ? std::fabs(x[j]) : m;
  return m;
}

// One value block's scales s[0, n) of a group, scaled for int16 weights:
// scaled[j] = s_j * 2^(13 - e(S)), S = max |s_j|; returns the scales' step
// 2^(e(S) - 13). S < kQ8_0GroupMinMax gives zeros and returns 0.
inline float Q8_0GroupScales(const float* s, int n, float* scaled) {
  const float m = Q8_0GroupMaxAbs(s, n);
  const int e = m < kQ8_0GroupMinMax ? 0 : std::ilogb(m);
  for (int j = 0; j < n; ++j) scaled[j] = m < kQ8_0GroupMinMax ? 0.0f : std::ldexp(s[j], kQ8_0GroupScaleExponent - e);
  return m < kQ8_0GroupMinMax ? 0.0f : std::ldexp(1.0f, e - kQ8_0GroupScaleExponent);
}

// A query's probabilities p[0, n) (each in [0, 1]) of a group, normalized:
// normalized[j] = p_j * 2^-e(P), P = max p_j; returns 2^e(P).
// P < kQ8_0GroupMinMax gives zeros and returns 0.
inline float Q8_0GroupProbabilities(const float* p, int n, float* normalized) {
  const float m = Q8_0GroupMaxAbs(p, n);
  const int e = m < kQ8_0GroupMinMax ? 0 : std::ilogb(m);
  for (int j = 0; j < n; ++j) normalized[j] = m < kQ8_0GroupMinMax ? 0.0f : std::ldexp(p[j], -e);
  return m < kQ8_0GroupMinMax ? 0.0f : std::ldexp(1.0f, e);
}

// The int16 weights of one group and value block, the scalar model of the
// kernels (n <= kQ8_0ValueGroupKeys): p[0, n) the query's probabilities, s[0, n) the keys' scales of
// the block (F32), w[0, n) the weights, round(p'_j * s'_j) ties to even and
// saturated to [-32768, 32767]; returns the step 2^e(P) * 2^(e(S) - 13)
// (0 when either is 0, with zero weights).
inline float Q8_0GroupWeights(const float* p, const float* s, int n, int16_t* w) {
  float pn[kQ8_0ValueGroupKeys], sn[kQ8_0ValueGroupKeys];
  const float unit = Q8_0GroupProbabilities(p, n, pn);
  const float scale_step = Q8_0GroupScales(s, n, sn);
  for (int j = 0; j < n; ++j) {
    const float r = std::nearbyint(pn[j] * sn[j]);  // |r| <= 2^15: only +2^15 needs saturating
    w[j] = static_cast<int16_t>(r > 32767.0f ? 32767.0f : r);
  }
  return unit * scale_step;
}

}  // namespace kvs

#endif  // KVSESSION_KERNELS_ATTENTION_Q8_0_VALUES_H_
