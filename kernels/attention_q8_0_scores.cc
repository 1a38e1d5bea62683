#include "kernels/attention_q8_0_scores.h"

#include "kernels/kernel_table.h"
#include "kernels/kv_dtype.h"
#include "kernels/packed_q8_0.h"

namespace kvs {
namespace {

// Bytes of packed keys per GEMM call when many queries share the keys
// (prefill): 15 groups (240 keys) at head_dim 128, most of L1. Each call
// computes the queries' block sums once, so fewer, larger chunks cost
// less per key.
constexpr size_t kPackedChunkBytes = 32768;
// Groups per call for a few queries (a decode row's GQA group): its keys
// stream from memory, and short chunks keep packing (the reads) and the
// arithmetic close together.
constexpr int kFewQueries = 4;
constexpr int kFewQueriesChunkGroups = 4;
// Groups ahead of the one being packed whose lines are asked for.
constexpr int kAheadGroups = 2;

// Asks for the lines of keys [k0, k1) into L2, as BlockPrefetch streams
// (simd_attention.h): rows of one block are contiguous, blocks are
// anywhere.
void PrefetchKeys(const void* const* k_blocks, int block_keys, size_t row_bytes, int k0, int k1) {
  while (k0 < k1) {
    const int b = k0 / block_keys, in_block = k0 % block_keys;
    const int end = (b + 1) * block_keys < k1 ? (b + 1) * block_keys : k1;
    const char* p = static_cast<const char*>(k_blocks[b]) + static_cast<size_t>(in_block) * row_bytes;
    const size_t bytes = static_cast<size_t>(end - k0) * row_bytes;
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 1);  // into L2 (prefetcht2)
    k0 = end;
  }
}

}  // namespace

void QuantizeQueryQ8_0(const float* q, int head_dim, float scale, uint8_t* out) {
  float* scales = reinterpret_cast<float*>(out + head_dim);
  kernel_table::ActiveKernelTable().quantize_int8(q, head_dim, 32, false, reinterpret_cast<int8_t*>(out), scales,
                                                  nullptr);
  for (int b = 0; b < head_dim / 32; ++b) scales[b] *= scale;
}

void ScoresQ8_0(const uint8_t* queries, int nq, int head_dim, const void* const* k_blocks, int block_keys,
                int n_keys, float* scores, size_t stride) {
  if (nq <= 0 || n_keys <= 0) return;
  const size_t row_bytes = KvBytes(KvDtype::kQ8_0, head_dim);
  PrefetchKeys(k_blocks, block_keys, row_bytes, 0, 16 * kAheadGroups < n_keys ? 16 * kAheadGroups : n_keys);
  // Group g0's rows (up to 16, not past c1) into rows[], their count
  // returned; the group kAheadGroups on is asked for: its rows in their
  // first block while this group is read (*ahead, *ahead_bytes), any in a
  // next block now.
  auto group_rows = [&](int g0, int c1, const uint8_t** rows, const uint8_t** ahead, size_t* ahead_bytes) {
    *ahead = nullptr;
    *ahead_bytes = 0;
    const int a0 = g0 + 16 * kAheadGroups, a1 = n_keys - a0 < 16 ? n_keys : a0 + 16;
    if (a0 < n_keys) {
      const int in_block_end = (a0 / block_keys + 1) * block_keys < a1 ? (a0 / block_keys + 1) * block_keys : a1;
      *ahead = static_cast<const uint8_t*>(k_blocks[a0 / block_keys]) + static_cast<size_t>(a0 % block_keys) * row_bytes;
      *ahead_bytes = static_cast<size_t>(in_block_end - a0) * row_bytes;
      PrefetchKeys(k_blocks, block_keys, row_bytes, in_block_end, a1);
    }
    // Walked from the group's first key (one division per group: per key,
    // they were 8% of a warm decode row).
    const int n_rows = c1 - g0 < 16 ? c1 - g0 : 16;
    int block = g0 / block_keys, in_block = g0 % block_keys;
    for (int n = 0; n < n_rows; ++n) {
      rows[n] = static_cast<const uint8_t*>(k_blocks[block]) + static_cast<size_t>(in_block) * row_bytes;
      if (++in_block == block_keys) {
        ++block;
        in_block = 0;
      }
    }
    return n_rows;
  };
  const uint8_t* rows[16];
  const uint8_t* ahead;
  size_t ahead_bytes;
  const kernel_table::ScoresQ8_0RowsFn from_rows = kernel_table::ActiveKernelTable().scores_q8_0_rows;
  if (from_rows != nullptr && nq <= kernel_table::kScoresQ8_0RowsMaxQueries) {
    for (int g0 = 0; g0 < n_keys; g0 += 16) {
      const int n_rows = group_rows(g0, n_keys, rows, &ahead, &ahead_bytes);
      from_rows(rows, n_rows, head_dim, queries, QueryQ8_0Bytes(head_dim), head_dim, nq, scores + g0,
                static_cast<int64_t>(stride), ahead, ahead_bytes);
    }
    return;
  }
  // Packed: chunks of keys packed into `packed`, then multiplied there.
  const size_t group_bytes = PackedQ8_0GroupBytes(head_dim);
  int chunk_groups = group_bytes >= kPackedChunkBytes ? 1 : static_cast<int>(kPackedChunkBytes / group_bytes);
  if (nq <= kFewQueries && chunk_groups > kFewQueriesChunkGroups) chunk_groups = kFewQueriesChunkGroups;
  const int chunk_keys = 16 * chunk_groups;
  alignas(64) uint8_t packed[kPackedChunkBytes];  // at least one group: head_dim <= kQ8_0ScoresMaxHeadDim
  for (int c0 = 0; c0 < n_keys; c0 += chunk_keys) {
    const int c1 = n_keys - c0 < chunk_keys ? n_keys : c0 + chunk_keys;
    for (int g0 = c0; g0 < c1; g0 += 16) {
      const int n_rows = group_rows(g0, c1, rows, &ahead, &ahead_bytes);
      PackQ8_0Group(rows, n_rows, head_dim, packed + static_cast<size_t>((g0 - c0) / 16) * group_bytes, ahead,
                    ahead_bytes);
    }
    MatmulPackedQ8_0(packed, c1 - c0, head_dim, 0, c1 - c0, queries, QueryQ8_0Bytes(head_dim), head_dim, nq,
                     scores + c0, static_cast<int64_t>(stride));
  }
}

void QueryScoresQ8_0(const float* q, int head_dim, const void* k_block, int n_keys, float scale, float* scores) {
  alignas(64) uint8_t query[QueryQ8_0Bytes(kQ8_0ScoresMaxHeadDim)];
  QuantizeQueryQ8_0(q, head_dim, scale, query);
  ScoresQ8_0(query, 1, head_dim, &k_block, n_keys, n_keys, scores, 0);
}

}  // namespace kvs
