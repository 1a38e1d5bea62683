// The SIMD kernels' side of attention_q8_0_values.h: folding the values of
// a Q8_0 KV cache into a query's accumulator, a chunk of keys at a time.
//
// A value block of a q8_0 cache holds its block_keys slots' F16 scales,
// then their int8 quants as rows of hd (kernels/q8_0_kv_blocks.h), so a
// chunk's scales of one value block are consecutive and its keys' quants
// hd bytes apart.
// A chunk is up to kQ8_0ValueKeys keys of one block, starting at a
// multiple of kQ8_0ValueKeys (where V::kInt16Groups a chunk is the part of
// a group the query sees). For each chunk:
//   ChunkScalesQ8_0   the value blocks' F16 scales of its keys, as F32
//                     (where V::kInt16Groups, scaled by a power of two
//                     per block): a load per value block; once per chunk,
//                     shared by every query;
//   ChunkWeightsQ8_0  each query's weights: p_t * scale rounded to BF16
//                     (kept as F32) at the levels with BF16 weights; where
//                     V::kInt16Groups the group's int16 weights and one
//                     step per value block (Q8_0GroupWeights), four
//                     queries at a time, in V's layout (Q8_0WeightIndex);
//   ValueMicroTileQ8_0  kQ queries x kC value vectors: acc += w * quants,
//                     the quants read in the block or from the
//                     chunk converted once for a large tile
//                     (ConvertChunkQ8_0). Where V::kInt16Groups, two keys
//                     at a time into int32 sums (V::DotPairs: keys 2i and
//                     2i+1 of the chunk, a lone last key paired with
//                     zeros), flushed once per call: a call is one whole
//                     chunk.
//   ValueSpanTileQ8_0  (int16 groups, a tile's whole groups) kQ queries x
//                     one value block over a run of groups converted
//                     once, the accumulators in registers across the
//                     run: each group flushed as above, the same bits.
// AccumulateInPlaceQ8_0 is the per-query kernel's value pass;
// RowWeightsQ8_0 gives the fallback (other head sizes: F32 products with
// BF16 weights at every level) its weights. Every kernel of a level makes
// the same chunks, so their bits agree (attention_q8_0_values.h).
//
// Include only from SIMD translation units, through simd_attention.h
// (everything is in an anonymous namespace: the ODR rule in
// cpu_features.h).
#ifndef KVSESSION_KERNELS_SIMD_ATTENTION_Q8_0_VALUES_H_
#define KVSESSION_KERNELS_SIMD_ATTENTION_Q8_0_VALUES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/attention_q8_0_values.h"
#include "kernels/kv_dtype.h"
#include "kernels/q8_0_kv_blocks.h"

namespace kvs {
namespace {

// Keeps a loaded vector in a register. A micro-tile uses each K or V vector
// for several queries; for AVX2 GCC 12 otherwise folds the load into every
// FMA that uses it (10 loads per 8 FMAs instead of 6), and the loop is
// bound by loads rather than FMAs: kvs-bench-kernels attention_prefill on
// Zen 3, 8-18% less time per type. The AVX-512 code was already kept in
// registers; no result changes.
// The asm works on a copy: with an element of the caller's array as its
// operand, GCC 12 keeps the array in memory and stores the element after
// every use.
template <class F>
inline void PinInRegister(F& x) {
  F r = x;
  asm("" : "+v"(r));
  x = r;
}

// True for vector operations that fold Q8_0 values in int16 groups
// (attention_q8_0_values.h), key pairs by V::DotPairs.
template <class V>
inline constexpr bool kInt16Groups = requires { requires V::kInt16Groups; };

// Keys per chunk (even: pairs never straddle two chunks; a group of the
// int16 contract).
constexpr int kQ8_0ValueKeys = kQ8_0ValueGroupKeys;

// Q8_0 blocks per value row of hd values (hd a multiple of 32).
template <int hd>
inline constexpr int kQ8_0Blocks = hd / kKvQ8_0BlockValues;

// A chunk's weights for one query: kQ8_0ChunkWeights of them, key t's of
// value block b at Q8_0WeightIndex (where V::kInt16Groups, V's layout:
// a pair's two weights adjacent).
template <class V>
using Q8_0Weight = std::conditional_t<kInt16Groups<V>, int16_t, float>;
template <class V, int hd>
inline constexpr int kQ8_0ChunkWeights = [] {
  if constexpr (kInt16Groups<V>) {
    return V::ChunkWeights(hd / kKvQ8_0BlockValues);
  } else {
    return hd / kKvQ8_0BlockValues * kQ8_0ValueKeys;
  }
}();
template <class V>
inline constexpr int Q8_0WeightIndex(int b, int t) {
  if constexpr (kInt16Groups<V>) {
    return V::WeightIndex(b, t);
  } else {
    return b * kQ8_0ValueKeys + t;
  }
}

// The int8 quants of value d of key `row` of a value block whose quants
// start at `quants` (Q8_0ValueQuants(block, hd, block_keys, 0)).
template <int hd>
inline const int8_t* Q8_0Quants(const void* quants, int row, int d) {
  return static_cast<const int8_t*>(quants) + static_cast<size_t>(row) * hd + d;
}

// Lanes t < n of the F16 at `halves` (consecutive), as F32; 0 for t >= n
// and for every lane when n <= 0. Reads only the n halves.
template <class V>
inline typename V::F LoadHalvesQ8_0(const uint8_t* halves, int n) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(halves);
  return n >= V::kLanes ? V::LoadF16(h) : n > 0 ? V::LoadF16Partial(h, n) : V::Zero();
}

// scales[b][t] = the F32 scale of value block b of key row0 + t of the
// value block at `block` (block_keys slots), for t < count; 0 for
// t >= count (keys past the chunk are never read): one load per value
// block and vector, the chunk's scales of a value block being consecutive.
// Where V::kInt16Groups, the group's scaled scales instead
// (Q8_0GroupScales) and scale_steps[b] block b's step; scale_steps is
// unused at the other levels.
template <class V, int hd>
inline void ChunkScalesQ8_0(const void* block, int block_keys, int row0, int count, float (*scales)[kQ8_0ValueKeys],
                            float* scale_steps) {
  constexpr int kBlocks = kQ8_0Blocks<hd>;
  auto first = [&](int b) { return Q8_0ValueScales(block, block_keys, b) + static_cast<size_t>(row0) * 2; };
  if constexpr (kInt16Groups<V>) {
    static_assert(V::kLanes == kQ8_0ValueKeys, "a group is one vector");
    for (int b0 = 0; b0 < kBlocks; b0 += 4) {
      constexpr int n = kBlocks < 4 ? kBlocks : 4;
      typename V::F s[4];
#pragma GCC unroll 4
      for (int b = 0; b < n; ++b) s[b] = LoadHalvesQ8_0<V>(first(b0 + b), count);
      V::ScaleGroupScales(s, n, scale_steps + b0);
#pragma GCC unroll 4
      for (int b = 0; b < n; ++b) V::Store(scales[b0 + b], s[b]);
    }
  } else {
    for (int b = 0; b < kBlocks; ++b) {
      for (int t = 0; t < kQ8_0ValueKeys; t += V::kLanes) {
        V::Store(scales[b] + t, LoadHalvesQ8_0<V>(first(b) + static_cast<size_t>(t) * 2, count - t));
      }
    }
  }
}

// Each query q < nq's weights of a chunk's count keys: w[q] at
// Q8_0WeightIndex(b, t) = Q8_0ValueWeight(p[q][t], scales[b][t]) for
// t < count, +0 beyond (p is read only below count). Where
// V::kInt16Groups, the group weights instead (Q8_0GroupWeights: scales
// and scale_steps from ChunkScalesQ8_0), 0 beyond, and steps[q][b] the
// block's step, four queries at a time; scale_steps and steps are unused
// at the other levels.
template <class V, int hd>
inline void ChunkWeightsQ8_0(const float* const* p, int nq, int count, const float (*scales)[kQ8_0ValueKeys],
                             const float* scale_steps, Q8_0Weight<V>* const* w, float* const* steps) {
  using F = typename V::F;
  constexpr int L = V::kLanes, kBlocks = kQ8_0Blocks<hd>;
  if constexpr (kInt16Groups<V>) {
    int q0 = 0;
    if (count == L) {  // whole groups, four queries at a time: the vectors stay in registers
      for (; q0 + 4 <= nq; q0 += 4) {
        const F pv[4] = {V::Load(p[q0]), V::Load(p[q0 + 1]), V::Load(p[q0 + 2]), V::Load(p[q0 + 3])};
        V::template StoreGroupWeights<kBlocks>(pv, 4, scales, scale_steps, w + q0, steps + q0);
      }
    }
    for (; q0 < nq; q0 += 4) {
      const int n = nq - q0 < 4 ? nq - q0 : 4;
      F pv[4];
#pragma GCC unroll 4
      for (int q = 0; q < n; ++q) pv[q] = count >= L ? V::Load(p[q0 + q]) : V::LoadPartial(p[q0 + q], count);
      V::template StoreGroupWeights<kBlocks>(pv, n, scales, scale_steps, w + q0, steps + q0);
    }
  } else {
    for (int q = 0; q < nq; ++q) {
      for (int t0 = 0; t0 < kQ8_0ValueKeys; t0 += L) {
        const int n = count - t0;
        const F pv = n >= L ? V::Load(p[q] + t0) : n > 0 ? V::LoadPartial(p[q] + t0, n) : V::Zero();
        for (int b = 0; b < kBlocks; ++b) {
          V::Store(w[q] + Q8_0WeightIndex<V>(b, t0), V::RoundToBf16(V::Mul(pv, V::Load(scales[b] + t0))));
        }
      }
    }
  }
}

// Keys [0, count) of a chunk (keys row0 .. of the value block whose quants
// start at `quants`) converted once for a large tile: where
// V::kInt16Groups, pair i's vectors 2b and 2b + 1 (value block b of keys
// 2i and 2i+1 as V::PairBlock makes them; zeros for a missing partner) at
// out + (i * hd / 16 + 2b) * 16 and the next 16; otherwise key t's quants
// as F32 at out + t * hd. out: kQ8_0ValueKeys * hd floats.
template <class V, int hd>
inline void ConvertChunkQ8_0(const void* quants, int row0, int count, float* out) {
  constexpr int L = V::kLanes;
  if constexpr (kInt16Groups<V>) {
    static_assert(2 * L == kKvQ8_0BlockValues, "a block is two vectors of pairs");
    for (int t = 0; t < count; t += 2) {
#pragma GCC unroll 8
      for (int d = 0; d < hd; d += kKvQ8_0BlockValues) {
        const int8_t* odd = t + 1 < count ? Q8_0Quants<hd>(quants, row0 + t + 1, d) : nullptr;
        typename V::Pairs first, second;
        V::PairBlock(Q8_0Quants<hd>(quants, row0 + t, d), odd, first, second);
        V::StorePairs(out + (t / 2 * (hd / L) + d / L) * L, first);
        V::StorePairs(out + (t / 2 * (hd / L) + d / L + 1) * L, second);
      }
    }
  } else {
    for (int t = 0; t < count; ++t) {  // (unrolled: each vector's address is then a constant offset)
#pragma GCC unroll 16
      for (int d = 0; d < hd; d += L) V::Store(out + t * hd + d, V::LoadI8(Q8_0Quants<hd>(quants, row0 + t, d)));
    }
  }
}

// acc[s][(c0 + c) * L ..] += the chunk's keys [0, count) for queries
// s < kQ (weights w[s] and steps[s], ChunkWeightsQ8_0) and value vectors
// c < kC: the quants of keys row0 + t of the value block whose quants
// start at `src` (kInBlock) or from ConvertChunkQ8_0's buffer at `src`.
// Where V::kInt16Groups, keys go in pairs into int32 sums, flushed into
// acc at the end (the whole group).
// With kStep, one prefetch.Step(lines) per key (per pair).
// Not inlined: inside the tile's loops GCC kept the value vectors on the
// stack (AVX2 prefill 1.1x slower).
template <class V, int hd, int kQ, int kC, bool kInBlock, bool kStep, class Prefetch>
__attribute__((noinline)) void ValueMicroTileQ8_0(const Q8_0Weight<V>* const* w, const float* const* steps,
                                                  float* const* acc, const void* src, int row0, int count, int c0,
                                                  Prefetch& prefetch, int lines) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  static_assert(kC * L % kKvQ8_0BlockValues == 0, "a micro-tile spans whole q8_0 blocks");
  // c0 is a multiple of kC, so vector c starts a block exactly when c * L
  // does, and lies in block BlockOf(c).
  const int first_block = c0 * L / kKvQ8_0BlockValues;
  auto BlockOf = [first_block](int c) { return first_block + c * L / kKvQ8_0BlockValues; };
  if constexpr (kInt16Groups<V>) {
    static_assert(2 * L == kKvQ8_0BlockValues && kC % 2 == 0, "whole blocks of two vectors of pairs");
    using P = typename V::Pairs;
    P sums[kQ][kC];
#pragma GCC unroll 8
    for (int s = 0; s < kQ; ++s) {
#pragma GCC unroll 16
      for (int c = 0; c < kC; ++c) sums[s][c] = V::ZeroSums();
    }
    // Keys t and t + 1 (t + 1 only when kBoth: a lone last key pairs with
    // zeros); the quants of key t at `even` (kInBlock: its values from
    // c0 * L on, in the block; else the converted pair's vector c0).
    auto pair = [&]<bool kBoth>(int t, const void* even) __attribute__((always_inline)) {
      if constexpr (kStep) prefetch.Step(lines);
      P vv[kC];  // block by block, as V::PairBlock orders them
#pragma GCC unroll 16
      for (int c = 0; c < kC; c += 2) {
        if constexpr (kInBlock) {
          const int8_t* e = static_cast<const int8_t*>(even) + c / 2 * kKvQ8_0BlockValues;
          V::PairBlock(e, kBoth ? e + hd : nullptr, vv[c], vv[c + 1]);
        } else {
          vv[c] = V::LoadPairs(static_cast<const float*>(even) + c * L);
          vv[c + 1] = V::LoadPairs(static_cast<const float*>(even) + (c + 1) * L);
        }
        PinInRegister(vv[c]);
        PinInRegister(vv[c + 1]);
      }
#pragma GCC unroll 8
      for (int s = 0; s < kQ; ++s) {
        P wb = vv[0];  // keys t and t + 1's weights for the block of vector c
#pragma GCC unroll 16
        for (int c = 0; c < kC; ++c) {
          if (c * L % kKvQ8_0BlockValues == 0) wb = V::BroadcastPair(w[s] + Q8_0WeightIndex<V>(BlockOf(c), t));
          P x = V::DotPairs(sums[s][c], vv[c], wb);
          PinInRegister(x);  // (else GCC 12 copies every sum to another register and back per pair)
          sums[s][c] = x;
        }
      }
    };
    // Key t's quants, advanced a pair at a time.
    const uint8_t* at = kInBlock ? reinterpret_cast<const uint8_t*>(Q8_0Quants<hd>(src, row0, c0 * L))
                                  : static_cast<const uint8_t*>(src) + sizeof(float) * c0 * L;
    const size_t pair_bytes = kInBlock ? 2 * hd : sizeof(float) * hd;
    int t = 0;
    for (; t + 1 < count; t += 2, at += pair_bytes) pair.template operator()<true>(t, at);
    if (t < count) pair.template operator()<false>(t, at);
#pragma GCC unroll 8
    for (int s = 0; s < kQ; ++s) {
#pragma GCC unroll 16
      for (int c = 0; c < kC; c += 2) {
        V::FlushBlockSums(acc[s] + (c0 + c) * L, sums[s][c], sums[s][c + 1], steps[s][BlockOf(c)]);
      }
    }
  } else {
    F a[kQ][kC];
#pragma GCC unroll 8
    for (int s = 0; s < kQ; ++s) {
#pragma GCC unroll 16
      for (int c = 0; c < kC; ++c) a[s][c] = V::Load(acc[s] + (c0 + c) * L);
    }
    for (int t = 0; t < count; ++t) {
      if constexpr (kStep) prefetch.Step(lines);
      F vv[kC];
#pragma GCC unroll 16
      for (int c = 0; c < kC; ++c) {
        const int d = (c0 + c) * L;
        if constexpr (kInBlock) {
          vv[c] = V::LoadI8(Q8_0Quants<hd>(src, row0 + t, d));
        } else {
          vv[c] = V::Load(static_cast<const float*>(src) + t * hd + d);
        }
        PinInRegister(vv[c]);
      }
#pragma GCC unroll 8
      for (int s = 0; s < kQ; ++s) {
        F wb = V::Zero();  // key t's weight for the block of vector c
#pragma GCC unroll 16
        for (int c = 0; c < kC; ++c) {
          if (c * L % kKvQ8_0BlockValues == 0) wb = V::Set1(w[s][Q8_0WeightIndex<V>(BlockOf(c), t)]);
          a[s][c] = V::Fma(wb, vv[c], a[s][c]);
        }
      }
    }
#pragma GCC unroll 8
    for (int s = 0; s < kQ; ++s) {
#pragma GCC unroll 16
      for (int c = 0; c < kC; ++c) V::Store(acc[s] + (c0 + c) * L, a[s][c]);
    }
  }
}

// Whole groups a converting tile folds in one run with its accumulators
// in registers (ValueSpanTileQ8_0).
inline constexpr int kQ8_0SpanGroups = 4;

// Floats of one whole group's pairs as ConvertChunkQ8_0 writes them.
template <int hd>
inline constexpr int kQ8_0GroupPairFloats = kQ8_0ValueKeys / 2 * hd;

// A run of whole groups (kQ8_0ValueKeys keys each, every one seen by the
// whole tile) for queries s < kQ and value block b (where V::kInt16Groups):
// for each group g < n in order, acc[s][32 b, 32 b + 32) = fma(float(S),
// step, acc) with S the group's exact int32 sums, as ValueMicroTileQ8_0
// flushes them, so the bits are the same. Group g's pairs at pairs + g *
// kQ8_0GroupPairFloats<hd> (ConvertChunkQ8_0), query s's weights at
// w + g * w_group + s * w_query and its steps at steps + g * steps_group +
// s * steps_query (ChunkWeightsQ8_0). The 2 x kQ accumulators stay in
// registers across the run, in PairBlock's order: a group's flush is a
// conversion and an FMA per vector, where a micro-tile call's is also a
// load, a store and two shuffles. Each call makes one prefetch.Step(lines)
// first (TileValuesQ8_0 passes a BlocksAhead). Not inlined, as
// ValueMicroTileQ8_0.
template <class V, int hd, int kQ, class Prefetch>
__attribute__((noinline)) void ValueSpanTileQ8_0(const int16_t* w, size_t w_query, size_t w_group, const float* steps,
                                                 size_t steps_query, size_t steps_group, float* const* acc,
                                                 const float* pairs, int n, int b, Prefetch& prefetch, int lines) {
  static_assert(kInt16Groups<V> && 2 * V::kLanes == kKvQ8_0BlockValues, "int16 groups, a block two vectors");
  using F = typename V::F;
  using P = typename V::Pairs;
  constexpr int L = V::kLanes;
  prefetch.Step(lines);
  F a[kQ][2];
#pragma GCC unroll 8
  for (int s = 0; s < kQ; ++s) V::LoadBlockAcc(acc[s] + b * kKvQ8_0BlockValues, a[s][0], a[s][1]);
  for (int g = 0; g < n; ++g) {
    const float* group = pairs + g * kQ8_0GroupPairFloats<hd> + 2 * b * L;
    const int16_t* wg = w + g * w_group;
    P sums[kQ][2];
#pragma GCC unroll 8
    for (int s = 0; s < kQ; ++s) sums[s][0] = sums[s][1] = V::ZeroSums();
#pragma GCC unroll 8
    for (int i = 0; i < kQ8_0ValueKeys / 2; ++i) {  // keys 2i and 2i + 1
      const P v0 = V::LoadPairs(group + i * hd), v1 = V::LoadPairs(group + i * hd + L);
#pragma GCC unroll 8
      for (int s = 0; s < kQ; ++s) {
        const int16_t* pair = wg + s * w_query + Q8_0WeightIndex<V>(b, 2 * i);
        V::DotPairsAt(sums[s][0], v0, pair);
        V::DotPairsAt(sums[s][1], v1, pair);
      }
    }
    const float* sg = steps + g * steps_group + b;
#pragma GCC unroll 8
    for (int s = 0; s < kQ; ++s) {
      V::FlushSums(a[s][0], sums[s][0], sg[s * steps_query]);
      V::FlushSums(a[s][1], sums[s][1], sg[s * steps_query]);
    }
  }
#pragma GCC unroll 8
  for (int s = 0; s < kQ; ++s) V::StoreBlockAcc(acc[s] + b * kKvQ8_0BlockValues, a[s][0], a[s][1]);
}

// A prefetch that asks for nothing (callers that ask whole blocks).
struct NoStepPrefetch {
  void Step(int) {}
};

// The per-query kernel's value pass: acc[0, hd) += the n keys of the
// value block at v (block_keys slots) with probabilities p[0, n), chunk by
// chunk.
template <class V, int kChunks>
void AccumulateInPlaceQ8_0(const float* p, const void* v, int block_keys, int n, float* acc) {
  constexpr int hd = kChunks * V::kLanes, kBlocks = kQ8_0Blocks<hd>;
  alignas(64) float scales[kBlocks][kQ8_0ValueKeys];
  alignas(64) Q8_0Weight<V> w[kQ8_0ChunkWeights<V, hd>];
  float scale_steps[kBlocks], steps[kBlocks];
  Q8_0Weight<V>* ws[1] = {w};  // written by ChunkWeightsQ8_0, read by the micro-tile
  float* ss[1] = {steps};
  const float* pm[1];
  float* as[1] = {acc};
  NoStepPrefetch none;
  const int8_t* quants = Q8_0ValueQuants(v, hd, block_keys, 0);
  for (int t0 = 0; t0 < n; t0 += kQ8_0ValueKeys) {
    const int count = n - t0 < kQ8_0ValueKeys ? n - t0 : kQ8_0ValueKeys;
    ChunkScalesQ8_0<V, hd>(v, block_keys, t0, count, scales, scale_steps);
    pm[0] = p + t0;
    ChunkWeightsQ8_0<V, hd>(pm, 1, count, scales, scale_steps, ws, ss);
    ValueMicroTileQ8_0<V, hd, 1, kChunks, true, false>(ws, ss, as, quants, t0, count, 0, none, 0);
  }
}

// Keys whose q8_0 value weights the fallback makes at a time, per query.
inline constexpr int kOneStepWeightKeys = 64;

// The fallback's weights for kQ queries over the same keys [j0, j0 + n)
// (n <= kOneStepWeightKeys) of the value block at `block` (block_keys
// slots of hd values): weights[q][b * kOneStepWeightKeys + j] =
// Q8_0ValueWeight(p[q][j], the scale of value block b of key j0 + j),
// V::kLanes keys at a time, each scale loaded once for the kQ queries;
// lanes past n get 0.
template <class V, int kQ>
void RowWeightsQ8_0(const float* const* p, const void* block, int block_keys, int j0, int n, int hd,
                    float* const* weights) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  static_assert(kOneStepWeightKeys % L == 0, "whole vectors of weights");
  const int blocks = hd / kKvQ8_0BlockValues;
  for (int j = 0; j < n; j += L) {
    const int m = n - j;
    F pv[kQ];
    for (int q = 0; q < kQ; ++q) pv[q] = m >= L ? V::Load(p[q] + j) : V::LoadPartial(p[q] + j, m);
    for (int b = 0; b < blocks; ++b) {
      const F scales = LoadHalvesQ8_0<V>(Q8_0ValueScales(block, block_keys, b) + static_cast<size_t>(j0 + j) * 2, m);
      for (int q = 0; q < kQ; ++q) {
        V::Store(weights[q] + b * kOneStepWeightKeys + j, V::RoundToBf16(V::Mul(pv[q], scales)));
      }
    }
  }
}

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_SIMD_ATTENTION_Q8_0_VALUES_H_
