// How attention folds the values of a Q8_0 KV cache: the weighted sum
// acc += p_j * v_j of the online softmax, with each probability and the
// value block's scale rounded together to BF16 so that the products can
// run as BF16 dot products (VDPBF16PS) where the CPU has them.
//
// Arithmetic (every instruction set and every kernel), for a query's
// probability p_j = e^(score_j - max) of key j, and key j's value row of
// q8_0 blocks (an F16 scale s_jb and 32 int8 quants q_jd per block b):
//   w_jb = Q8_0ValueWeight(p_j, s_jb): the F32 product p_j * s_jb rounded
//          to BF16 (nearest even; an F32 subnormal becomes a zero of its
//          sign, as VCVTNEPS2BF16 does);
//   acc_d += w_jb * q_jd for every d of block b: the product is exact in
//          F32 (8 by 8 significant bits), so each key adds one rounding.
// The sum of the probabilities (the softmax's denominator) stays F32 and
// unrounded. Keys are added in order; at the AVX-512 level with
// AVX512-BF16 they go in pairs (keys 2i and 2i+1 of a block, counted from
// the block's first key), as VDPBF16PS adds them, and a key whose pair
// partner is not visible to the query (or lies past the block) pairs with
// a zero weight and zero values. Every kernel of one level pairs the same
// keys, so prefill's tiles, a decode row, forks sharing blocks and the
// per-query kernel keep the same bits; levels differ in summation order
// only (about 1e-6 relative).
//
// Precision: BF16 keeps 8 significant bits of the weight (relative error at
// most 2^-8), below a Q8_0 value's own rounding (half a step of max|v|/127
// per block). On the reference models the mean KL against the f16 cache
// moved by at most 2% (docs/performance.md, "KV types").
//
// Contract: pure, header-only, thread-safe.
#ifndef KVSESSION_KERNELS_ATTENTION_Q8_0_VALUES_H_
#define KVSESSION_KERNELS_ATTENTION_Q8_0_VALUES_H_

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

}  // namespace kvs

#endif  // KVSESSION_KERNELS_ATTENTION_Q8_0_VALUES_H_
