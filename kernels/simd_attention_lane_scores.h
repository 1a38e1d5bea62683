// Scores of a tile's queries with the queries in lanes: the tiled kernel's
// score pass (simd_attention_tiled.h TileScores) for tiles of more than
// kStreamQueries queries at 16 lanes (AVX-512), giving the bits the
// per-query kernel gives, with no horizontal reduction.
//
// What the bits are. The per-query kernel (simd_attention.h) scores a key
// k against a query q as 16 partial sums, lane i holding
//   P_i = fma(q[16c + i], k[16c + i], ...) over c = 0, 1, ... in order
// (starting from +0), reduced by Avx512::TransposeSum, whose tree is
//   y_L = (P_4L + P_4L+2) + (P_4L+1 + P_4L+3)       (L = 0 .. 3)
//   score = ((y_0 + y_2) + (y_1 + y_3)) * scale.
// (F32 additions commute exactly, so only the tree's shape matters.)
// Here each P_i is a vector over 16 queries: for each c, the queries'
// values at d = 16c + i (a row of the transposed queries, QueryLanes)
// times key k's value at d, broadcast; the tree is then vertical
// additions. Nothing is rounded differently, so a query's scores are the
// same bits as the per-query kernel's; attention_tiled_test compares them.
//
// Why. TransposeSum is 30 shuffles per query and 16 keys, all on the one
// port that also runs half of the FMAs, and its partial vectors go through
// memory; with the queries in lanes the pass is FMAs with one broadcast
// operand each, and one 16 x 16 transpose per 16 queries and 16 keys
// (docs/performance/sapphire-rapids.md, "Attention's F32 tiles: the queries in lanes").
//
// Contract: pure functions; the caller owns every buffer (the transposed
// queries live in the tile's part vectors, simd_attention_tiled.h).
// Include only from AVX-512 translation units, after simd_attention.h
// (anonymous namespace: the ODR rule in cpu_features.h).
#ifndef KVSESSION_KERNELS_SIMD_ATTENTION_LANE_SCORES_H_
#define KVSESSION_KERNELS_SIMD_ATTENTION_LANE_SCORES_H_

#include <cstddef>

#include "kernels/attention_tile.h"

namespace kvs {
namespace {

// Queries per lane group (one vector).
constexpr int kLaneQueries = 16;
// Micro-tile calls per 16 keys (LaneScoresGroup's prefetch Steps).
constexpr int kLaneScoreCalls = 4;

// True when V's reduction is the tree above (the 16-lane traits).
template <class V>
inline constexpr bool kScoresInLanes = V::kLanes == 16;

// Floats of the transposed queries of a tile (QueryLanes) with heads of hd
// values: fits the tile's part vectors (kAttentionTilePartFloats) for hd
// up to 256.
constexpr size_t QueryLaneFloats(int hd) {
  return static_cast<size_t>(kAttentionTileQueries / kLaneQueries) * hd * kLaneQueries;
}

// qt[g][d] (16 floats, aligned) = the values at d of queries 16 g .. 16 g +
// 15 of the `count` query rows q (zeros past count), for g < groups.
template <class V, int hd>
void QueryLanes(const float* const* q, int count, float* qt) {
  using F = typename V::F;
  const int groups = (count + kLaneQueries - 1) / kLaneQueries;
  for (int g = 0; g < groups; ++g) {
    for (int d0 = 0; d0 < hd; d0 += 16) {
      F rows[16], cols[16];
      for (int i = 0; i < 16; ++i) {
        const int s = g * kLaneQueries + i;
        rows[i] = s < count ? V::Load(q[s] + d0) : V::Zero();
      }
      V::Transpose16x16(rows, cols);
      for (int c = 0; c < 16; ++c) V::Store(qt + (static_cast<size_t>(g) * hd + d0 + c) * kLaneQueries, cols[c]);
    }
  }
}

// pair[g][t] = P_i + P_i+2 of key t (F32 rows `keys`, hd apart) for lane
// group g of the transposed queries qt: 2 kG kKeys accumulators, the
// reduction's steps c unrolled (one loop body of about 30 instructions per
// step, so the loop stays in the decoded-instruction cache).
template <class V, int hd, int kG, int kKeys>
__attribute__((always_inline)) inline void LanePairSums(const float* qt, const float* keys, int i,
                                                        typename V::F (&pair)[kG][kKeys]) {
  using F = typename V::F;
  constexpr int kChunks = hd / 16;
  F a[kG][kKeys], b[kG][kKeys];  // P_i and P_i+2
#pragma GCC unroll 8
  for (int g = 0; g < kG; ++g) {
#pragma GCC unroll 8
    for (int t = 0; t < kKeys; ++t) a[g][t] = b[g][t] = V::Zero();
  }
  const float* q = qt + static_cast<size_t>(i) * kLaneQueries;
  const float* k = keys + i;
#pragma GCC unroll 16
  for (int c = 0; c < kChunks; ++c) {
    F qa[kG], qb[kG];
#pragma GCC unroll 8
    for (int g = 0; g < kG; ++g) {
      qa[g] = V::Load(q + (static_cast<size_t>(g) * hd + 16 * c) * kLaneQueries);
      qb[g] = V::Load(q + (static_cast<size_t>(g) * hd + 16 * c + 2) * kLaneQueries);
    }
#pragma GCC unroll 8
    for (int t = 0; t < kKeys; ++t) {
#pragma GCC unroll 8
      for (int g = 0; g < kG; ++g) {
        a[g][t] = V::FmaBroadcast(qa[g], k + t * hd + 16 * c, a[g][t]);
        b[g][t] = V::FmaBroadcast(qb[g], k + t * hd + 16 * c + 2, b[g][t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < kG; ++g) {
#pragma GCC unroll 8
    for (int t = 0; t < kKeys; ++t) pair[g][t] = V::Add(a[g][t], b[g][t]);
  }
}

// Keys kKeys of F32 rows `keys` (hd apart) against kG lane groups of
// queries: st[g * 16 + t] (a vector over the group's queries) = key t's
// score times `scale`, for t < kKeys.
template <class V, int hd, int kG, int kKeys>
void LaneScoresMicro(const float* qt, const float* keys, float scale, typename V::F* st) {
  using F = typename V::F;
  F y[4][kG][kKeys];
#pragma GCC unroll 1
  for (int L = 0; L < 4; ++L) {
    F x0[kG][kKeys], x1[kG][kKeys];
    LanePairSums<V, hd, kG, kKeys>(qt, keys, 4 * L, x0);
    LanePairSums<V, hd, kG, kKeys>(qt, keys, 4 * L + 1, x1);
#pragma GCC unroll 8
    for (int g = 0; g < kG; ++g) {
#pragma GCC unroll 8
      for (int t = 0; t < kKeys; ++t) y[L][g][t] = V::Add(x0[g][t], x1[g][t]);
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < kG; ++g) {
#pragma GCC unroll 8
    for (int t = 0; t < kKeys; ++t) {
      const F sum = V::Add(V::Add(y[0][g][t], y[2][g][t]), V::Add(y[1][g][t], y[3][g][t]));
      st[g * 16 + t] = V::Mul(sum, V::Set1(scale));
    }
  }
}

// Scores of 16 keys (F32 rows `keys`, hd apart) for the tile's `count`
// queries, transposed in qt (QueryLanes): query s's at scores + s * stride,
// 16 floats.
// One prefetch Step of `lines` follows each of the kLaneScoreCalls micro-tile
// calls.
template <class V, int hd>
void LaneScoresGroup(const float* qt, int count, const float* keys, float scale, float* scores, size_t stride,
                     BlockPrefetch& prefetch, int lines) {
  using F = typename V::F;
  F st[2 * 16];  // [group][key]: a vector over the group's queries
  if (count > kLaneQueries) {
#pragma GCC unroll 1
    for (int t = 0; t < 16; t += 4) {
      LaneScoresMicro<V, hd, 2, 4>(qt, keys + t * hd, scale, st + t);
      prefetch.Step(lines);
    }
  } else {
#pragma GCC unroll 1
    for (int t = 0; t < 16; t += 8) {
      LaneScoresMicro<V, hd, 1, 8>(qt, keys + t * hd, scale, st + t);
      prefetch.Step(2 * lines);
    }
  }
  for (int g = 0; g * kLaneQueries < count; ++g) {
    F by_query[16];
    V::Transpose16x16(reinterpret_cast<const F(&)[16]>(st[g * 16]), by_query);
    const int n = count - g * kLaneQueries < kLaneQueries ? count - g * kLaneQueries : kLaneQueries;
    for (int i = 0; i < n; ++i) V::Store(scores + static_cast<size_t>(g * kLaneQueries + i) * stride, by_query[i]);
  }
}

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_SIMD_ATTENTION_LANE_SCORES_H_
