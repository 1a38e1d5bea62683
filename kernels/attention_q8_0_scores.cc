#include "kernels/attention_q8_0_scores.h"

#include "kernels/kernel_table.h"
#include "kernels/kv_dtype.h"
#include "kernels/packed_q8_0.h"
#include "kernels/q8_0_kv_blocks.h"

namespace kvs {
namespace {

// Bytes of packed keys per GEMM call when many queries share the keys
// (prefill): 15 groups (240 keys) at head_dim 128, most of L1. Each call
// computes the queries' block sums once, so fewer, larger chunks cost
// less per key.
constexpr size_t kPackedChunkBytes = 32768;
// Groups ahead of the one being scored whose lines are asked for.
constexpr int kAheadGroups = 2;

// The key groups of a sequence of blocks: group g holds keys [16g, 16g + 16).
struct KeyGroups {
  const void* const* k_blocks;
  int groups_per_block;
  size_t group_bytes;

  const uint8_t* operator()(int g) const {
    return static_cast<const uint8_t*>(k_blocks[g / groups_per_block]) +
           static_cast<size_t>(g % groups_per_block) * group_bytes;
  }
};

// Asks for group g's lines into L2 (prefetcht2), as BlockPrefetch streams.
void PrefetchGroup(const uint8_t* group, size_t group_bytes) {
  for (size_t off = 0; off < group_bytes; off += 64) __builtin_prefetch(group + off, 0, 1);
}

}  // namespace

void QuantizeQueryQ8_0(const float* q, int head_dim, float scale, uint8_t* out) {
  float* scales = reinterpret_cast<float*>(out + head_dim);
  int16_t* sums = reinterpret_cast<int16_t*>(scales + head_dim / 32);
  kernel_table::ActiveKernelTable().quantize_int8(q, head_dim, 32, false, reinterpret_cast<int8_t*>(out), scales,
                                                  sums);
  for (int b = 0; b < head_dim / 32; ++b) scales[b] *= scale;
}

void ScoresQ8_0GroupScalar(const uint8_t* group, int n_rows, int64_t head_dim, const uint8_t* queries,
                           size_t query_bytes, size_t scales_offset, int nq, float* scores, int64_t stride,
                           const uint8_t* /*ahead*/, size_t /*ahead_bytes*/) {
  alignas(64) uint8_t packed[kPackedChunkBytes];  // one group: head_dim <= kQ8_0ScoresMaxHeadDim
  Q8_0KeyGroupToPacked(group, static_cast<int>(head_dim), packed);
  MatmulPackedQ8_0Scalar(packed, 16, head_dim, 0, n_rows, queries, query_bytes, scales_offset, nq, scores, stride);
}

void ScoresQ8_0(const uint8_t* queries, int nq, int head_dim, const void* const* k_blocks, int block_keys,
                int n_keys, float* scores, size_t stride) {
  if (nq <= 0 || n_keys <= 0) return;
  const size_t group_bytes = Q8_0KeyGroupBytes(head_dim);
  const KeyGroups groups{k_blocks, (block_keys + kQ8_0KeyGroupSlots - 1) / kQ8_0KeyGroupSlots, group_bytes};
  const int n_groups = (n_keys + 15) / 16;
  for (int g = 0; g < kAheadGroups && g < n_groups; ++g) PrefetchGroup(groups(g), group_bytes);
  const size_t query_bytes = QueryQ8_0Bytes(head_dim);
  const kernel_table::ScoresQ8_0GroupFn group_fn = kernel_table::ActiveKernelTable().scores_q8_0_group;
  if (group_fn != nullptr && nq <= kernel_table::kScoresQ8_0GroupMaxQueries) {
    // A decode row's few queries: each group where it lies, the one
    // kAheadGroups on asked for while it is scored.
    for (int g = 0; g < n_groups; ++g) {
      const int g0 = 16 * g, n_rows = n_keys - g0 < 16 ? n_keys - g0 : 16;
      const uint8_t* ahead = g + kAheadGroups < n_groups ? groups(g + kAheadGroups) : nullptr;
      group_fn(groups(g), n_rows, head_dim, queries, query_bytes, head_dim, nq, scores + g0,
               static_cast<int64_t>(stride), ahead, ahead != nullptr ? group_bytes : 0);
    }
    return;
  }
  // Many queries: chunks of groups copied as packed groups into `packed`,
  // then multiplied there by the level's packed kernel.
  const size_t packed_group_bytes = PackedQ8_0GroupBytes(head_dim);
  const int chunk_groups =
      packed_group_bytes >= kPackedChunkBytes ? 1 : static_cast<int>(kPackedChunkBytes / packed_group_bytes);
  alignas(64) uint8_t packed[kPackedChunkBytes];  // at least one group: head_dim <= kQ8_0ScoresMaxHeadDim
  for (int c = 0; c < n_groups; c += chunk_groups) {
    const int c_end = n_groups - c < chunk_groups ? n_groups : c + chunk_groups;
    for (int g = c; g < c_end; ++g) {
      if (g + kAheadGroups < n_groups) PrefetchGroup(groups(g + kAheadGroups), group_bytes);
      Q8_0KeyGroupToPacked(groups(g), head_dim, packed + static_cast<size_t>(g - c) * packed_group_bytes);
    }
    const int k0 = 16 * c, k1 = 16 * c_end < n_keys ? 16 * c_end : n_keys;
    MatmulPackedQ8_0(packed, k1 - k0, head_dim, 0, k1 - k0, queries, query_bytes, head_dim, nq, scores + k0,
                     static_cast<int64_t>(stride));
  }
}

void QueryScoresQ8_0(const float* q, int head_dim, const void* k_block, int n_keys, float scale, float* scores) {
  alignas(64) uint8_t query[QueryQ8_0Bytes(kQ8_0ScoresMaxHeadDim)];
  QuantizeQueryQ8_0(q, head_dim, scale, query);
  const int block_keys = (n_keys + kQ8_0KeyGroupSlots - 1) / kQ8_0KeyGroupSlots * kQ8_0KeyGroupSlots;
  ScoresQ8_0(query, 1, head_dim, &k_block, block_keys, n_keys, scores, 0);
}

}  // namespace kvs
