// The tiled kernel for one row's queries of several KV heads at once
// (AttentionUpdateHeads in attention.h): a decode row of a session that
// shares no pages with its neighbours in the batch (a lone row:
// Transformer::AttentionLoneTask), whose reads of a long context bound
// it.
//
// Why: a page holds the blocks of one layer's KV heads side by side
// (cache/kv_geometry.h), so heads [h0, h0 + n) of a page are one run of
// n blocks in memory. A call per head reads one block per page, 2 KB
// (q8_0, 16 tokens), far from the next; here each pass takes the heads
// in turn over spans of a few pages (kHeadsSpanKeys keys), so one thread's
// reads of a page are n blocks long and the hardware prefetcher streams
// most of them (docs/performance/sapphire-rapids.md, "A decode row's KV heads in turn").
//
// The bits are those of a call per head (attention_heads_test checks
// them): the heads' queries form one tile, so each query's softmax is
// still one step over its whole context (TileSoftmax); its scores are the
// same numbers wherever they are computed (a key's score depends only on
// the query and the key, block by block), written into its score row in
// key order; and its acc takes the values key by key in order, span
// after span, as the runs' driver folds shared then own blocks
// (simd_attention_runs.h). Spans are whole blocks and a multiple of 32
// keys, so no key group, q8_0 key pair or AMX value chunk (keys [32c,
// 32c + 32) of the sequence) is split differently.
//
// Include only from SIMD translation units, after simd_attention_tiled.h
// (everything is in an anonymous namespace: the ODR rule in
// cpu_features.h).
#ifndef KVSESSION_KERNELS_SIMD_ATTENTION_HEADS_H_
#define KVSESSION_KERNELS_SIMD_ATTENTION_HEADS_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/attention.h"
#include "kernels/attention_tile.h"
#include "kernels/kernel_table.h"
#include "kernels/simd_attention_tiled.h"

namespace kvs {
namespace {

// Keys of a span: each head's blocks for this many keys are read before
// the next head's: 16 pages of 16 (docs/performance/sapphire-rapids.md,
// "A decode row's KV heads in turn").
constexpr int kHeadsSpanKeys = 256;

// Blocks per span: whole blocks, at least kHeadsSpanKeys keys, and a
// multiple of 32 keys (AMX value chunks, q8_0 key pairs, key groups).
inline int HeadsSpanBlocks(int block_keys) {
  int blocks = (kHeadsSpanKeys + block_keys - 1) / block_keys;
  while (blocks * block_keys % 32 != 0) ++blocks;
  return blocks;
}

// AttentionUpdateHeads with `passes` (VectorTilePasses or the AMX ones),
// for kv_heads * heads <= kAttentionTileQueries queries: query (h, j) at
// q + (h * heads + j) * hd, its state index h * heads + j; KV head h's
// blocks at k + h * n_blocks and v + h * n_blocks.
template <class V, class Passes>
void AttentionHeadsTiledWith(Passes& passes, const float* q, int heads, int kv_heads, const void* const* k,
                             const void* const* v, int n_blocks, int block_keys, int visible, float scale,
                             float* max, float* sum, float* acc, float* scratch) {
  constexpr int hd = Passes::kHeadDim;
  const int n = visible < n_blocks * block_keys ? visible : n_blocks * block_keys;
  if (n <= 0) return;
  float* scores = TileScoreRows(scratch);
  const size_t stride = static_cast<size_t>(n);
  AttentionTile tile;  // every head's queries, for the softmax
  for (int s = 0; s < kv_heads * heads; ++s) {
    tile.q[s] = q + static_cast<size_t>(s) * hd;
    tile.n[s] = n;
    tile.state[s] = s;
  }
  tile.count = kv_heads * heads;
  tile.n_max = tile.n_min = n;
  const int span_blocks = HeadsSpanBlocks(block_keys);
  const int used_blocks = (n + block_keys - 1) / block_keys;
  // Head h's queries over the keys of the span from block b0.
  auto part = [&](int h, int b0) {
    AttentionTile p;
    const int first = b0 * block_keys, span_keys = span_blocks * block_keys;
    const int keys = n - first < span_keys ? n - first : span_keys;
    for (int j = 0; j < heads; ++j) {
      p.q[j] = tile.q[h * heads + j];
      p.n[j] = keys;
      p.state[j] = h * heads + j;
    }
    p.count = heads;
    p.n_max = p.n_min = keys;
    return p;
  };
  auto rows_of = [&](int h, int b0) { return scores + static_cast<size_t>(h) * heads * stride + b0 * block_keys; };
  for (int b0 = 0; b0 < used_blocks; b0 += span_blocks) {
    for (int h = 0; h < kv_heads; ++h) {
      passes.Scores(part(h, b0), k + static_cast<size_t>(h) * n_blocks + b0, block_keys, scale, rows_of(h, b0),
                    stride);
    }
  }
  TileSoftmax<V, hd>(tile, scores, stride, max, sum, acc);
  for (int b0 = 0; b0 < used_blocks; b0 += span_blocks) {
    for (int h = 0; h < kv_heads; ++h) {
      passes.Values(part(h, b0), v + static_cast<size_t>(h) * n_blocks + b0, block_keys, rows_of(h, b0), stride,
                    acc);
    }
  }
}

// Whether AttentionHeadsTiledWith takes the call: a GQA group (a tile per
// head, as a call per head would make) and every head's queries in one
// tile.
inline bool HeadsTileTakes(int heads, int kv_heads) {
  return heads >= kAttentionTileMinQueries && kv_heads * heads <= kAttentionTileQueries;
}

// The table's attention_heads at a vector level: AttentionHeadsTiledWith
// where the head fits a register-resident size (1, 2, 4, 8 or 16 vectors),
// else AttentionBlocksTiled once per head. The same bits either way.
template <class V>
void AttentionHeadsTiled(KvDtype dtype, const float* q, int heads, int kv_heads, const void* const* k,
                         const void* const* v, int n_blocks, int block_keys, int head_dim, int visible, float scale,
                         float* max, float* sum, float* acc, float* scratch) {
  if (HeadsTileTakes(heads, kv_heads)) {
    auto fits = [&](auto chunks) {
      constexpr int kChunks = decltype(chunks)::value;
      if (head_dim != kChunks * V::kLanes) return false;
      WithKvDtype(dtype, [&](auto t) {
        VectorTilePasses<V, decltype(t)::value, kChunks> passes(scratch);
        AttentionHeadsTiledWith<V>(passes, q, heads, kv_heads, k, v, n_blocks, block_keys, visible, scale, max, sum,
                                   acc, scratch);
      });
      return true;
    };
    if (fits(std::integral_constant<int, 1>{}) || fits(std::integral_constant<int, 2>{}) ||
        fits(std::integral_constant<int, 4>{}) || fits(std::integral_constant<int, 8>{}) ||
        fits(std::integral_constant<int, 16>{})) {
      return;
    }
  }
  kernel_table::AttentionHeadsOneByOne(AttentionBlocksTiled<V>, dtype, q, heads, kv_heads, k, v, n_blocks,
                                       block_keys, head_dim, visible, scale, max, sum, acc, scratch);
}

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_SIMD_ATTENTION_HEADS_H_
