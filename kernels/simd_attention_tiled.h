// The tiled (blocked) attention kernel for many queries at once: prefill
// rows x the heads of one GQA group against the same keys. The contract is
// AttentionUpdateBlocks in attention.h.
//
// It does, for every query, exactly the arithmetic of the per-query kernel
// (AttentionBlocksFixed in simd_attention.h): the same scores (per key
// group of kLanes keys, kLanes partial dot vectors accumulated over
// head_dim in order and reduced by V::TransposeSum; a key past the query's
// last full group in its last block by the per-key path), the same
// one-step online softmax, and the same value accumulation (key by key, in
// order). Only the order in which the queries' independent operations run
// changes: a tile of up to kAttentionTileQueries queries shares each K and V
// vector loaded (and converted to F32) in registers, kScoreQ queries x
// kScoreK keys or kValueQ queries x kValueChunks value vectors at a time;
// at 16 lanes, tiles of more than kStreamQueries queries make the same
// partial sums and TransposeSum's tree with the queries in lanes instead
// (simd_attention_lane_scores.h: no shuffles per key). So its results are
// bit-identical to the per-query kernel's for every row count, and the two
// may be mixed freely (a decode row of one query head per KV head stays on
// the per-query kernel); attention_isa_test checks the bits. Q8_0 keys take
// ScoresQ8_0 (attention_q8_0_scores.h) for the whole tile, whose bits are
// the same for any tile, and Q8_0 values TileValuesQ8_0
// (attention_q8_0_values.h: BF16-rounded weights, or int16 groups of key
// pairs at the level that has them), the chunks the per-query kernel makes;
// with int16 groups a tile that converts its chunks folds the blocks all
// its queries see in runs of kQ8_0SpanGroups groups (ValueSpanTileQ8_0),
// each group flushed as the micro-tiles flush it.
// How a pass prefetches its blocks (BlockPrefetch: streamed for a decode
// row's GQA group, for the lane scores and for tiles that convert their
// blocks; whole blocks for the other passes of large tiles, an F32 cache's
// values) changes no result.
//
// Include only from SIMD translation units, after simd_attention.h
// (everything is in an anonymous namespace: the ODR rule in
// cpu_features.h).
#ifndef KVSESSION_KERNELS_SIMD_ATTENTION_TILED_H_
#define KVSESSION_KERNELS_SIMD_ATTENTION_TILED_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/attention_tile.h"
#include "kernels/kernel_table.h"
#include "kernels/simd_attention.h"
#include "kernels/simd_attention_lane_scores.h"

namespace kvs {
namespace {

// Register blocking per instruction set (32 registers at 16 lanes, 16 at 8).
template <class V>
struct AttentionTileShape {
  static constexpr bool kWide = V::kLanes >= 16;
  static constexpr int kScoreQ = kWide ? 4 : 2;      // queries per score micro-tile
  static constexpr int kScoreK = 4;                  // keys per score micro-tile
  static constexpr int kValueQ = kWide ? 6 : 2;      // queries per value micro-tile
  static constexpr int kValueChunks = 4;             // value vectors per value micro-tile
};

// Tiles of at most this many queries (a decode row's GQA group) stream
// their blocks (BlockPrefetch); larger ones (prefill: arithmetic-bound)
// ask for whole blocks.
constexpr int kStreamQueries = 4;

inline bool StreamsBlocks(int queries) { return queries <= kStreamQueries; }

// Larger tiles over an F16, BF16 or Q8_0 cache convert K and V to F32 once
// per tile, kConvertKeys keys at a time into a buffer on the stack, and run
// the micro-tiles on the F32 rows: the micro-tiles would otherwise convert
// every vector once per kScoreQ (kValueQ) queries. The conversion is exact,
// so the bits are the same.
constexpr int kConvertKeys = 16;

template <KvDtype kT>
bool ConvertsBlocks(int queries) {
  return kT != KvDtype::kF32 && queries > kStreamQueries;
}

// keys [j0, j1) of a block (rows `hd` values apart) as F32 rows of `out`.
template <class V, KvDtype kT, int hd>
inline void ConvertRows(const void* block, int j0, int j1, float* out) {
  for (int j = j0; j < j1; ++j) {
    typename V::F scale = V::Zero();  // q8_0: the block's, converted once
#pragma GCC unroll 16
    for (int d = 0; d < hd; d += V::kLanes) {
      if (d % kKvScaleSpan<kT> == 0) scale = LoadKvScale<V, kT>(block, j, d, hd);
      V::Store(out + (j - j0) * hd + d, LoadKvLanesScaled<V, kT>(block, j, d, hd, scale));
    }
  }
}

// One tile: the queries' pointers, visible counts and state indexes.
struct AttentionTile {
  int count = 0;
  int n_max = 0;  // the most keys any query of the tile sees
  int n_min = 0;  // the fewest (> 0)
  const float* q[kAttentionTileQueries];
  int n[kAttentionTileQueries];
  int state[kAttentionTileQueries];  // index i = r * heads + h
};

// part[s * L + t0 + t] = the kScoreK key partial dot vectors t0 + t of
// queries s < kQ (keys at `keys`, row stride hd, group of L keys); one
// prefetch Step of `lines` per kScoreK keys.
template <class V, KvDtype kT, int kChunks, int kQ>
inline void ScorePartials(const float* const* q, const void* keys, typename V::F* part, BlockPrefetch& prefetch,
                          int lines) {
  using F = typename V::F;
  constexpr int L = V::kLanes, hd = kChunks * L, K = AttentionTileShape<V>::kScoreK;
  for (int t0 = 0; t0 < L; t0 += K) {
    prefetch.Step(lines);
    F a[kQ][K];
#pragma GCC unroll 8
    for (int s = 0; s < kQ; ++s) {
#pragma GCC unroll 8
      for (int t = 0; t < K; ++t) a[s][t] = V::Zero();
    }
    F scale[K];  // each key's scale at d (q8_0: converted once per block)
#pragma GCC unroll 16
    for (int d = 0; d < hd; d += L) {
      F kv[K];
#pragma GCC unroll 8
      for (int t = 0; t < K; ++t) {
        if (d % kKvScaleSpan<kT> == 0) scale[t] = LoadKvScale<V, kT>(keys, t0 + t, d, hd);
        kv[t] = LoadKvLanesScaled<V, kT>(keys, t0 + t, d, hd, scale[t]);
        PinInRegister(kv[t]);
      }
#pragma GCC unroll 8
      for (int s = 0; s < kQ; ++s) {
        const F qd = V::Load(q[s] + d);
#pragma GCC unroll 8
        for (int t = 0; t < K; ++t) a[s][t] = V::Fma(qd, kv[t], a[s][t]);
      }
    }
#pragma GCC unroll 8
    for (int s = 0; s < kQ; ++s) {
#pragma GCC unroll 8
      for (int t = 0; t < K; ++t) part[s * L + t0 + t] = a[s][t];
    }
  }
}

// Scores of the tile's queries for keys [0, n_max): scores of query s at
// scores + s * stride (one row per query, every block in turn).
template <class V, KvDtype kT, int kChunks>
void TileScores(const AttentionTile& tile, const void* const* k, int block_keys, float scale,
                float* scores, size_t stride, typename V::F* part, float* converted) {
  using F = typename V::F;
  constexpr int L = V::kLanes, hd = kChunks * L, SQ = AttentionTileShape<V>::kScoreQ;
  if constexpr (kT == KvDtype::kQ8_0) {  // every query against every key (attention_q8_0_scores.h)
    alignas(64) uint8_t queries[kAttentionTileQueries * QueryQ8_0Bytes(hd)];
    for (int s = 0; s < tile.count; ++s) QuantizeQueryQ8_0(tile.q[s], hd, scale, queries + s * QueryQ8_0Bytes(hd));
    ScoresQ8_0(queries, tile.count, hd, k, block_keys, tile.n_max, scores, stride);
  } else {  // F32, F16, BF16: F32 products
    const size_t key_bytes = RowBytes<kT>(hd);
    const size_t block_bytes = static_cast<size_t>(block_keys) * key_bytes;
    const int used_blocks = (tile.n_max + block_keys - 1) / block_keys;
    // Tiles beyond a decode row's group at 16 lanes: the queries in lanes
    // (simd_attention_lane_scores.h), transposed into the part vectors,
    // the blocks streamed a Step per micro-tile call.
    const bool in_lanes = kScoresInLanes<V> && !StreamsBlocks(tile.count);
    BlockPrefetch prefetch(k, used_blocks, block_bytes, StreamsBlocks(tile.count) || in_lanes);
    const int lines = in_lanes ? 0 : prefetch.LinesPerStep(block_keys / AttentionTileShape<V>::kScoreK);
    const int group_lines = in_lanes ? prefetch.LinesPerStep((block_keys + L - 1) / L * kLaneScoreCalls) : 0;
    if constexpr (kScoresInLanes<V>) {
      static_assert(QueryLaneFloats(hd) + V::kLanes <= kAttentionTilePartFloats, "the part vectors hold the queries");
      if (in_lanes) QueryLanes<V, hd>(tile.q, tile.count, reinterpret_cast<float*>(part));
    }
    for (int b = 0; b < used_blocks; ++b) {
      prefetch.AtBlock(b);
      const int first = b * block_keys;
      const int nb = tile.n_max - first < block_keys ? tile.n_max - first : block_keys;
      const char* kb = static_cast<const char*>(k[b]);
      int j = 0;
      // The tile's queries over one group of L keys stored as type kU.
      auto score_group = [&]<KvDtype kU>(const void* keys) {
        int s0 = 0;
        for (; s0 + SQ <= tile.count; s0 += SQ) {
          ScorePartials<V, kU, kChunks, SQ>(tile.q + s0, keys, part + s0 * L, prefetch, lines);
        }
        switch (tile.count - s0) {  // the tile's last queries
          case 3:
            if constexpr (SQ > 3) ScorePartials<V, kU, kChunks, 3>(tile.q + s0, keys, part + s0 * L, prefetch, lines);
            break;
          case 2:
            if constexpr (SQ > 2) ScorePartials<V, kU, kChunks, 2>(tile.q + s0, keys, part + s0 * L, prefetch, lines);
            break;
          case 1: ScorePartials<V, kU, kChunks, 1>(tile.q + s0, keys, part + s0 * L, prefetch, lines); break;
          default: break;
        }
      };
      for (; j + L <= nb; j += L) {
        if constexpr (kScoresInLanes<V>) {
          if (in_lanes) {
            const float* rows = reinterpret_cast<const float*>(kb + j * key_bytes);
            if constexpr (kT != KvDtype::kF32) {
              ConvertRows<V, kT, hd>(kb, j, j + L, converted);
              rows = converted;
            }
            LaneScoresGroup<V, hd>(reinterpret_cast<const float*>(part), tile.count, rows, scale,
                                   scores + first + j, stride, prefetch, group_lines);
            continue;
          }
        }
        if (ConvertsBlocks<kT>(tile.count)) {
          ConvertRows<V, kT, hd>(kb, j, j + L, converted);
          score_group.template operator()<KvDtype::kF32>(converted);
        } else {
          score_group.template operator()<kT>(kb + j * key_bytes);
        }
        for (int s = 0; s < tile.count; ++s) {
          F group[L];
  #pragma GCC unroll 16
          for (int t = 0; t < L; ++t) group[t] = part[s * L + t];
          V::Store(scores + s * stride + first + j, V::Mul(V::TransposeSum(group), V::Set1(scale)));
        }
      }
      if (j < nb) {  // keys after the block's last full group: the per-key path
        prefetch.Step(prefetch.LinesPerStep(1));
        for (int s = 0; s < tile.count; ++s) {
          BlockScores<V, kT>(tile.q[s], kb + j * key_bytes, nb - j, hd, scale, scores + s * stride + first + j);
        }
      }
    }
    // A query whose last block ends inside a group the tile took as a whole
    // scores that group's keys by the per-key path, as the per-query kernel.
    for (int s = 0; s < tile.count; ++s) {
      const int n = tile.n[s];
      const int b = (n - 1) / block_keys, nb = n - b * block_keys;
      const int j = nb / L * L;
      if (j < nb) {
        BlockScores<V, kT>(tile.q[s], static_cast<const char*>(k[b]) + j * key_bytes, nb - j, hd, scale,
                             scores + s * stride + b * block_keys + j);
      }
    }
  }
}

// acc of queries [s0, s0 + kQ), value vectors [c0, c0 + kValueChunks):
// += p[j] * v_j for keys [j0, j1) of the block at vb; with at most
// kStreamQueries queries, one prefetch Step of `lines` per key.
template <class V, KvDtype kT, int kChunks, int kQ, int kC>
inline void ValueMicroTile(const float* const* p, float* const* acc, const void* vb, int j0, int j1, int c0,
                           BlockPrefetch& prefetch, int lines) {
  using F = typename V::F;
  constexpr int L = V::kLanes, hd = kChunks * L;
  F a[kQ][kC];
#pragma GCC unroll 8
  for (int s = 0; s < kQ; ++s) {
#pragma GCC unroll 8
    for (int c = 0; c < kC; ++c) a[s][c] = V::Load(acc[s] + (c0 + c) * L);
  }
  for (int j = j0; j < j1; ++j) {
    if constexpr (kQ <= kStreamQueries) prefetch.Step(lines);
    F vv[kC];
    F scale = V::Zero();
#pragma GCC unroll 8
    for (int c = 0; c < kC; ++c) {
      // c0 is a multiple of kC: where kC vectors span whole q8_0 blocks,
      // vector c starts a block exactly when c * L does.
      const int d = (c0 + c) * L;
      if constexpr ((kC * L) % kKvScaleSpan<kT> == 0) {
        if ((c * L) % kKvScaleSpan<kT> == 0) scale = LoadKvScale<V, kT>(vb, j, d, hd);
        vv[c] = LoadKvLanesScaled<V, kT>(vb, j, d, hd, scale);
      } else {
        vv[c] = LoadKvLanes<V, kT>(vb, j, d, hd);
      }
      PinInRegister(vv[c]);
    }
#pragma GCC unroll 8
    for (int s = 0; s < kQ; ++s) {
      const F pj = V::Set1(p[s][j]);
#pragma GCC unroll 8
      for (int c = 0; c < kC; ++c) a[s][c] = V::Fma(pj, vv[c], a[s][c]);
    }
  }
#pragma GCC unroll 8
  for (int s = 0; s < kQ; ++s) {
#pragma GCC unroll 8
    for (int c = 0; c < kC; ++c) V::Store(acc[s] + (c0 + c) * L, a[s][c]);
  }
}

// The buffers of a q8_0 tile's run of whole groups (ValueSpanTileQ8_0):
// each group's pairs (ConvertChunkQ8_0), every tile query's weights and
// steps (ChunkWeightsQ8_0); n groups so far.
template <class V, int hd>
struct Q8_0GroupRun {
  static constexpr int kWeights = kQ8_0ChunkWeights<V, hd>, kBlocks = kQ8_0Blocks<hd>;
  alignas(64) float pairs[kQ8_0SpanGroups][kQ8_0GroupPairFloats<hd>];
  alignas(64) int16_t w[kQ8_0SpanGroups][kAttentionTileQueries][kWeights];
  float steps[kQ8_0SpanGroups][kAttentionTileQueries][kBlocks];
  int n = 0;
};

// Asks for the lines of a pass's blocks in order, up to `lines` per Step,
// from block `first` on, never at or past the block AllowTo last named;
// SkipTo(b) passes over lines of blocks before b not yet asked for.
class BlocksAhead {
 public:
  BlocksAhead(const void* const* blocks, int n_blocks, size_t block_bytes, int first)
      : blocks_(blocks), n_blocks_(n_blocks), block_bytes_(block_bytes), block_(first) {}
  void AllowTo(int limit) { limit_ = limit < n_blocks_ ? limit : n_blocks_; }
  void SkipTo(int b) {
    if (block_ < b) {
      block_ = b;
      offset_ = 0;
    }
  }
  __attribute__((always_inline)) void Step(int lines) {
    int block = block_;  // (locals: with the members, GCC stored both after every line)
    size_t offset = offset_;
    for (; lines > 0 && block < limit_; --lines) {
      _mm_prefetch(static_cast<const char*>(blocks_[block]) + offset, _MM_HINT_T2);
      offset += 64;
      if (offset >= block_bytes_) {
        ++block;
        offset = 0;
      }
    }
    block_ = block;
    offset_ = offset;
  }

 private:
  const void* const* blocks_;
  int n_blocks_;
  size_t block_bytes_;
  int block_;          // the next line to ask for: offset_ into block_
  size_t offset_ = 0;
  int limit_ = 0;
};

// TileValues for a q8_0 cache (attention_q8_0_values.h), a chunk of
// kQ8_0ValueKeys keys at a time: the chunk's scales, each query's weights,
// then the micro-tiles (from the block's rows for a decode row's group,
// from the chunk converted once for larger tiles). Keys [0, shared_end) of
// a block go for the whole tile, the rest per query; with int16 groups
// shared_end is a multiple of kQ8_0ValueKeys unless it is the block's end,
// so every query's chunks are its groups, as in the per-query kernel.
template <class V, int kChunks>
void TileValuesQ8_0(const AttentionTile& tile, const void* const* v, int block_keys, const float* scores,
                    size_t stride, float* acc, float* converted) {
  constexpr int L = V::kLanes, hd = kChunks * L, kBlocks = kQ8_0Blocks<hd>;
  constexpr int VQ = AttentionTileShape<V>::kValueQ;
  constexpr int VC = AttentionTileShape<V>::kValueChunks < kChunks ? AttentionTileShape<V>::kValueChunks : kChunks;
  constexpr bool kGroups = kInt16Groups<V>;  // int16 groups, their keys taken in pairs
  const size_t block_bytes = static_cast<size_t>(block_keys) * RowBytes<KvDtype::kQ8_0>(hd);
  const int used_blocks = (tile.n_max + block_keys - 1) / block_keys;
  // Tiles that convert their chunks stream the blocks a Step per
  // micro-tile call, as TileValuesF32.
  const bool convert = !StreamsBlocks(tile.count);
  BlockPrefetch prefetch(v, used_blocks, block_bytes, true);
  const int lines =
      convert ? 0 : prefetch.LinesPerStep((kGroups ? (block_keys + 1) / 2 : block_keys) * ((kChunks + VC - 1) / VC));
  const int chunks_per_block = (block_keys + kQ8_0ValueKeys - 1) / kQ8_0ValueKeys;
  const int call_lines =
      convert ? prefetch.LinesPerStep(chunks_per_block * (tile.count + VQ - 1) / VQ * ((kChunks + VC - 1) / VC)) : 0;
  alignas(64) float scales[kBlocks][kQ8_0ValueKeys];
  alignas(64) Q8_0Weight<V> w[kAttentionTileQueries][kQ8_0ChunkWeights<V, hd>];
  float scale_steps[kBlocks], steps[kAttentionTileQueries][kBlocks];
  // Each query's weights and steps (written by ChunkWeightsQ8_0, read by
  // the micro-tiles through the same pointers).
  Q8_0Weight<V>* ws[kAttentionTileQueries];
  float* ss[kAttentionTileQueries];
  const float* ps[kAttentionTileQueries];  // each query's probabilities of the chunk
  float* a[kAttentionTileQueries];
  for (int s = 0; s < tile.count; ++s) {
    ws[s] = w[s];
    ss[s] = steps[s];
    a[s] = acc + static_cast<size_t>(tile.state[s]) * hd;
  }
  // Queries [s0, s0 + kQ) over the count keys of the chunk at key j0 of
  // the value block whose quants start at `quants`.
  auto micro = [&]<int kQ>(const int8_t* quants, int j0, int count, int s0) {
    for (int c0 = 0; c0 < kChunks; c0 += VC) {
      if (convert) {
        ValueMicroTileQ8_0<V, hd, kQ, VC, false, false>(ws + s0, ss + s0, a + s0, converted, 0, count, c0, prefetch,
                                                        lines);
        prefetch.Step(call_lines);
      } else {
        ValueMicroTileQ8_0<V, hd, kQ, VC, true, true>(ws + s0, ss + s0, a + s0, quants, j0, count, c0, prefetch,
                                                      lines);
      }
    }
  };
  // Int16 groups in a tile that converts its chunks: blocks the whole tile
  // sees to their end go in runs of kQ8_0SpanGroups groups, each run
  // folded by ValueSpanTileQ8_0 with the accumulators in registers (the
  // same bits; the group's weights, steps and pairs made as above). The
  // run's calls ask for the next run's blocks (BlocksAhead).
  struct NoRun {};
  std::conditional_t<kGroups, Q8_0GroupRun<V, hd>, NoRun> run;
  BlocksAhead run_ahead(v, used_blocks, block_bytes, BlockPrefetch::kStreamAheadBlocks);
  const int run_calls = (tile.count + VQ - 1) / VQ * kBlocks;
  const int run_lines =
      (static_cast<int>((block_bytes + 63) / 64) * kQ8_0SpanGroups * kQ8_0ValueKeys / block_keys + run_calls - 1) /
      run_calls;
  auto fold_run = [&] {
    if constexpr (kGroups) {
      if (run.n == 0) return;
      constexpr size_t kW = Q8_0GroupRun<V, hd>::kWeights;
      auto calls = [&]<int kQ>(int s0) {
        for (int vb = 0; vb < kBlocks; ++vb) {
          ValueSpanTileQ8_0<V, hd, kQ>(&run.w[0][s0][0], kW, kAttentionTileQueries * kW, &run.steps[0][s0][0],
                                       kBlocks, kAttentionTileQueries * kBlocks, a + s0, &run.pairs[0][0], run.n,
                                       vb, run_ahead, run_lines);
        }
      };
      int s0 = 0;
      for (; s0 + VQ <= tile.count; s0 += VQ) calls.template operator()<VQ>(s0);
      switch (tile.count - s0) {  // the tile's last queries, together
        case 5: if constexpr (VQ > 5) calls.template operator()<5>(s0); break;
        case 4: if constexpr (VQ > 4) calls.template operator()<4>(s0); break;
        case 3: if constexpr (VQ > 3) calls.template operator()<3>(s0); break;
        case 2: if constexpr (VQ > 2) calls.template operator()<2>(s0); break;
        case 1: calls.template operator()<1>(s0); break;
        default: break;
      }
      run.n = 0;
    }
  };
  for (int b = 0; b < used_blocks; ++b) {
    const int first = b * block_keys;
    const int8_t* quants = Q8_0ValueQuants(v[b], hd, block_keys, 0);
    const int shared = tile.n_min - first < block_keys ? tile.n_min - first : block_keys;
    if constexpr (kGroups) {
      if (convert && shared == block_keys && block_keys % kQ8_0ValueKeys == 0) {
        run_ahead.SkipTo(b + 1);
        run_ahead.AllowTo(b + 1 + kQ8_0SpanGroups * kQ8_0ValueKeys / block_keys);
        for (int j0 = 0; j0 < block_keys; j0 += kQ8_0ValueKeys) {
          const int g = run.n++;
          ChunkScalesQ8_0<V, hd>(v[b], block_keys, j0, kQ8_0ValueKeys, scales, scale_steps);
          Q8_0Weight<V>* wg[kAttentionTileQueries];
          float* sg[kAttentionTileQueries];
          for (int s = 0; s < tile.count; ++s) {
            ps[s] = scores + s * stride + first + j0;
            wg[s] = run.w[g][s];
            sg[s] = run.steps[g][s];
          }
          ChunkWeightsQ8_0<V, hd>(ps, tile.count, kQ8_0ValueKeys, scales, scale_steps, wg, sg);
          ConvertChunkQ8_0<V, hd>(quants, j0, kQ8_0ValueKeys, run.pairs[g]);
          if (run.n == kQ8_0SpanGroups) fold_run();
        }
        continue;
      }
      fold_run();
    }
    prefetch.AtBlock(b);
    const int shared_end =
        shared <= 0 ? 0 : (!kGroups || shared == block_keys) ? shared : shared / kQ8_0ValueKeys * kQ8_0ValueKeys;
    for (int j0 = 0; j0 < shared_end; j0 += kQ8_0ValueKeys) {
      const int count = shared_end - j0 < kQ8_0ValueKeys ? shared_end - j0 : kQ8_0ValueKeys;
      ChunkScalesQ8_0<V, hd>(v[b], block_keys, j0, count, scales, scale_steps);
      for (int s = 0; s < tile.count; ++s) ps[s] = scores + s * stride + first + j0;
      ChunkWeightsQ8_0<V, hd>(ps, tile.count, count, scales, scale_steps, ws, ss);
      if (convert) ConvertChunkQ8_0<V, hd>(quants, j0, count, converted);
      int s0 = 0;
      for (; s0 + VQ <= tile.count; s0 += VQ) micro.template operator()<VQ>(quants, j0, count, s0);
      switch (tile.count - s0) {  // the tile's last queries, together
        case 5: if constexpr (VQ > 5) micro.template operator()<5>(quants, j0, count, s0); break;
        case 4: if constexpr (VQ > 4) micro.template operator()<4>(quants, j0, count, s0); break;
        case 3: if constexpr (VQ > 3) micro.template operator()<3>(quants, j0, count, s0); break;
        case 2: if constexpr (VQ > 2) micro.template operator()<2>(quants, j0, count, s0); break;
        case 1: micro.template operator()<1>(quants, j0, count, s0); break;
        default: break;
      }
    }
    for (int s = 0; s < tile.count; ++s) {  // the keys only some queries see
      const int mine = tile.n[s] - first < block_keys ? tile.n[s] - first : block_keys;
      for (int j0 = shared_end; j0 < mine; j0 += kQ8_0ValueKeys) {
        const int count = mine - j0 < kQ8_0ValueKeys ? mine - j0 : kQ8_0ValueKeys;
        ChunkScalesQ8_0<V, hd>(v[b], block_keys, j0, count, scales, scale_steps);
        ps[s] = scores + s * stride + first + j0;
        ChunkWeightsQ8_0<V, hd>(ps + s, 1, count, scales, scale_steps, ws + s, ss + s);
        for (int c0 = 0; c0 < kChunks; c0 += VC) {
          ValueMicroTileQ8_0<V, hd, 1, VC, true, true>(ws + s, ss + s, a + s, quants, j0, count, c0, prefetch,
                                                       lines);
        }
      }
    }
  }
  fold_run();
}

// Folds the tile's values of an F32, F16 or BF16 cache: every query's acc
// += p_j * v_j for its keys, in key order; keys [0, n_min) the whole tile
// together, the rest per query.
template <class V, KvDtype kT, int kChunks>
void TileValuesF32(const AttentionTile& tile, const void* const* v, int block_keys, const float* scores,
                   size_t stride, float* acc, float* converted) {
  constexpr int hd = kChunks * V::kLanes, VQ = AttentionTileShape<V>::kValueQ;
  constexpr int VC = AttentionTileShape<V>::kValueChunks < kChunks ? AttentionTileShape<V>::kValueChunks : kChunks;
  const size_t block_bytes = static_cast<size_t>(block_keys) * RowBytes<kT>(hd);
  const int used_blocks = (tile.n_max + block_keys - 1) / block_keys;
  // Tiles that convert their blocks stream them too, a Step after each
  // micro-tile call rather than a block's lines at once (a burst of
  // prefetches fills the line-fill buffers and stalls the loads).
  const bool steps_per_call = ConvertsBlocks<kT>(tile.count);
  BlockPrefetch prefetch(v, used_blocks, block_bytes, StreamsBlocks(tile.count) || steps_per_call);
  const int calls_per_block = (block_keys + kConvertKeys - 1) / kConvertKeys * ((tile.count + VQ - 1) / VQ) *
                              ((kChunks + VC - 1) / VC);
  const int lines = steps_per_call ? 0 : prefetch.LinesPerStep(block_keys * ((kChunks + VC - 1) / VC));
  const int call_lines = steps_per_call ? prefetch.LinesPerStep(calls_per_block) : 0;
  const float* p[kAttentionTileQueries];
  float* a[kAttentionTileQueries];
  for (int b = 0; b < used_blocks; ++b) {
    prefetch.AtBlock(b);
    const int first = b * block_keys;
    const int shared = tile.n_min - first < block_keys ? tile.n_min - first : block_keys;
    for (int s = 0; s < tile.count; ++s) {
      p[s] = scores + s * stride + first;
      a[s] = acc + static_cast<size_t>(tile.state[s]) * hd;
    }
    // Keys [j0, j1) for every query, from values stored as type kU at
    // `vb` (key j0 at row j0 - base): each query's acc still takes the
    // keys in increasing order, a sub-range after the one before.
    auto value_range = [&]<KvDtype kU>(const void* vb, int base, int j0, int j1) {
      const float* ps[kAttentionTileQueries];
      for (int s = 0; s < tile.count; ++s) ps[s] = p[s] + base;
      int s0 = 0;
      for (; s0 + VQ <= tile.count; s0 += VQ) {
        for (int c0 = 0; c0 < kChunks; c0 += VC) {
          ValueMicroTile<V, kU, kChunks, VQ, VC>(ps + s0, a + s0, vb, j0 - base, j1 - base, c0, prefetch, lines);
          prefetch.Step(call_lines);
        }
      }
      auto rest = [&](auto queries) {  // the tile's last queries, together
        constexpr int kQ = decltype(queries)::value;
        for (int c0 = 0; c0 < kChunks; c0 += VC) {
          ValueMicroTile<V, kU, kChunks, kQ, VC>(ps + s0, a + s0, vb, j0 - base, j1 - base, c0, prefetch, lines);
          prefetch.Step(call_lines);
        }
      };
      switch (tile.count - s0) {
        case 5: if constexpr (VQ > 5) rest(std::integral_constant<int, 5>{}); break;
        case 4: if constexpr (VQ > 4) rest(std::integral_constant<int, 4>{}); break;
        case 3: if constexpr (VQ > 3) rest(std::integral_constant<int, 3>{}); break;
        case 2: if constexpr (VQ > 2) rest(std::integral_constant<int, 2>{}); break;
        case 1: rest(std::integral_constant<int, 1>{}); break;
        default: break;
      }
    };
    if (shared > 0) {
      if (ConvertsBlocks<kT>(tile.count)) {
        for (int j0 = 0; j0 < shared; j0 += kConvertKeys) {
          const int j1 = shared - j0 < kConvertKeys ? shared : j0 + kConvertKeys;
          ConvertRows<V, kT, hd>(v[b], j0, j1, converted);
          value_range.template operator()<KvDtype::kF32>(converted, j0, j0, j1);
        }
      } else {
        value_range.template operator()<kT>(v[b], 0, 0, shared);
      }
    }
    const int from = shared > 0 ? shared : 0;
    for (int s = 0; s < tile.count; ++s) {  // the keys only some queries see
      const int mine = tile.n[s] - first < block_keys ? tile.n[s] - first : block_keys;
      if (mine <= from) continue;
      for (int c0 = 0; c0 < kChunks; c0 += VC) {
        ValueMicroTile<V, kT, kChunks, 1, VC>(p + s, a + s, v[b], from, mine, c0, prefetch, lines);
      }
    }
  }
}

// Folds the tile's values (TileValuesQ8_0 for a q8_0 cache).
template <class V, KvDtype kT, int kChunks>
void TileValues(const AttentionTile& tile, const void* const* v, int block_keys, const float* scores,
                size_t stride, float* acc, float* converted) {
  if constexpr (kT == KvDtype::kQ8_0) {
    // (Heads of less than a q8_0 block never meet a q8_0 cache.)
    if constexpr (kChunks * V::kLanes % kKvQ8_0BlockValues == 0) {
      TileValuesQ8_0<V, kChunks>(tile, v, block_keys, scores, stride, acc, converted);
    }
  } else {
    TileValuesF32<V, kT, kChunks>(tile, v, block_keys, scores, stride, acc, converted);
  }
}

// The one online-softmax step of every query of the tile, as
// AttentionBlocksFixed does it per query: its scores (row s of `scores`)
// become e^(score - new max), and its sum and acc are rescaled to the new
// max.
template <class V, int hd>
void TileSoftmax(const AttentionTile& tile, float* scores, size_t stride, float* max, float* sum, float* acc) {
  for (int s = 0; s < tile.count; ++s) {
    const int i = tile.state[s], n = tile.n[s];
    const float correction = SoftmaxStep<V>(scores + s * stride, n, max[i], sum[i]);
    ScaleRow<V>(acc + static_cast<size_t>(i) * hd, hd, correction);
  }
}

// The tiled kernel's scratch (attention_tile.h): the part vectors
// (aligned), then one score row per tile query.
template <class V>
typename V::F* TilePartVectors(float* scratch) {
  using F = typename V::F;
  return reinterpret_cast<F*>((reinterpret_cast<uintptr_t>(scratch) + sizeof(F) - 1) / sizeof(F) * sizeof(F));
}
inline float* TileScoreRows(float* scratch) { return scratch + kAttentionTilePartFloats; }

// K or V rows converted to F32 (ConvertsBlocks): L keys for scores,
// kConvertKeys for values.
template <class V, KvDtype kT, int hd>
inline constexpr int kConvertedFloats =
    kT == KvDtype::kF32 ? 1 : (kConvertKeys > V::kLanes ? kConvertKeys : V::kLanes) * hd;

// A tile's two passes over the keys as the vector kernels make them
// (TileScores, TileValues), with their buffers. The drivers below
// (AttentionBlocksTiledWith, and AttentionRunsTiledWith in
// simd_attention_runs.h) take the passes as a parameter: the AMX kernels
// (attention_amx.cc) bring passes of their own and share the drivers,
// TileSoftmax included. One object per call, on the stack.
template <class V, KvDtype kT, int kChunks>
class VectorTilePasses {
 public:
  static constexpr int kHeadDim = kChunks * V::kLanes;

  explicit VectorTilePasses(float* scratch) : part_(TilePartVectors<V>(scratch)) {}

  // Scores of the tile's queries for keys [0, tile.n_max), query s's at
  // scores + s * stride (TileScores).
  void Scores(const AttentionTile& tile, const void* const* k, int block_keys, float scale, float* scores,
              size_t stride) {
    TileScores<V, kT, kChunks>(tile, k, block_keys, scale, scores, stride, part_, converted_);
  }
  // Folds each query's values, its weights e^(score - max) in its row of
  // `weights` for its first tile.n[s] keys (TileValues).
  void Values(const AttentionTile& tile, const void* const* v, int block_keys, const float* weights, size_t stride,
              float* acc) {
    TileValues<V, kT, kChunks>(tile, v, block_keys, weights, stride, acc, converted_);
  }

 private:
  typename V::F* part_;
  alignas(64) float converted_[kConvertedFloats<V, kT, kHeadDim>];
};

// AttentionUpdateBlocks with `passes` (VectorTilePasses or the AMX ones),
// the queries in tiles of kAttentionTileQueries (consecutive state
// indexes): per tile its scores, one online-softmax step per query, its
// values.
template <class V, class Passes>
void AttentionBlocksTiledWith(Passes& passes, const float* q, int64_t q_row_stride, int rows, int heads,
                              const void* const* k, const void* const* v, int n_blocks, int block_keys,
                              const int* visible, float scale, float* max, float* sum, float* acc, float* scratch) {
  constexpr int hd = Passes::kHeadDim;
  const int total = n_blocks * block_keys;
  float* scores = TileScoreRows(scratch);
  const int nq = rows * heads;
  for (int i0 = 0; i0 < nq;) {
    AttentionTile tile;
    for (; i0 < nq && tile.count < kAttentionTileQueries; ++i0) {
      const int r = i0 / heads, h = i0 % heads;
      const int n = visible[r] < total ? visible[r] : total;
      if (n <= 0) continue;
      const int s = tile.count++;
      tile.q[s] = q + r * q_row_stride + h * hd;
      tile.n[s] = n;
      tile.state[s] = i0;
      tile.n_max = s == 0 || n > tile.n_max ? n : tile.n_max;
      tile.n_min = s == 0 || n < tile.n_min ? n : tile.n_min;
    }
    if (tile.count == 0) continue;
    const size_t stride = static_cast<size_t>(tile.n_max);
    passes.Scores(tile, k, block_keys, scale, scores, stride);
    TileSoftmax<V, hd>(tile, scores, stride, max, sum, acc);
    passes.Values(tile, v, block_keys, scores, stride, acc);
  }
}

// AttentionUpdateBlocks for head_dim = kChunks vectors by the vector
// passes.
template <class V, KvDtype kT, int kChunks>
void AttentionBlocksTiledFixed(const float* q, int64_t q_row_stride, int rows, int heads,
                               const void* const* k, const void* const* v, int n_blocks,
                               int block_keys, const int* visible, float scale, float* max,
                               float* sum, float* acc, float* scratch) {
  VectorTilePasses<V, kT, kChunks> passes(scratch);
  AttentionBlocksTiledWith<V>(passes, q, q_row_stride, rows, heads, k, v, n_blocks, block_keys, visible, scale, max,
                              sum, acc, scratch);
}

// AttentionBlocksTiledFixed when head_dim is kChunks vectors; false
// (nothing done) otherwise.
template <class V, int kChunks>
bool TiledIfHeadFits(KvDtype dtype, const float* q, int64_t q_row_stride, int rows, int heads,
                     const void* const* k, const void* const* v, int n_blocks, int block_keys,
                     int head_dim, const int* visible, float scale, float* max, float* sum,
                     float* acc, float* scratch) {
  if (head_dim != kChunks * V::kLanes) return false;
  WithKvDtype(dtype, [&](auto t) {
    AttentionBlocksTiledFixed<V, decltype(t)::value, kChunks>(q, q_row_stride, rows, heads, k, v, n_blocks,
                                                              block_keys, visible, scale, max, sum, acc, scratch);
  });
  return true;
}

// The tiled kernel where the per-query kernel keeps its accumulators in
// registers (head_dim 1, 2, 4, 8 or 16 vectors) and the call has at least
// kAttentionTileMinQueries queries; otherwise the per-query kernel, whose
// results are the same bits.
template <class V>
void AttentionBlocksTiled(KvDtype dtype, const float* q, int64_t q_row_stride, int rows, int heads,
                          const void* const* k, const void* const* v, int n_blocks, int block_keys,
                          int head_dim, const int* visible, float scale, float* max, float* sum,
                          float* acc, float* scratch) {
  if (rows * heads >= kAttentionTileMinQueries) {
    auto tiled = [&](auto chunks) {
      return TiledIfHeadFits<V, decltype(chunks)::value>(dtype, q, q_row_stride, rows, heads, k, v,
                                                         n_blocks, block_keys, head_dim, visible,
                                                         scale, max, sum, acc, scratch);
    };
    if (tiled(std::integral_constant<int, 1>{}) || tiled(std::integral_constant<int, 2>{}) ||
        tiled(std::integral_constant<int, 4>{}) || tiled(std::integral_constant<int, 8>{}) ||
        tiled(std::integral_constant<int, 16>{})) {
      return;
    }
  }
  AttentionBlocksWith<V>(dtype, q, q_row_stride, rows, heads, k, v, n_blocks, block_keys, head_dim,
                         visible, scale, max, sum, acc, scratch);
}

// The table entries: the tiled kernel, and the per-query one for
// comparisons (attention.h UseTiledAttention).
template <class V>
void FillTiledAttentionEntries(kernel_table::KernelTable* t) {
  FillAttentionEntries<V>(t);
  t->attention_blocks_per_query = t->attention_blocks;
  t->attention_blocks = AttentionBlocksTiled<V>;
}

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_SIMD_ATTENTION_TILED_H_
