// Attention scores against the keys of a Q8_0 KV cache, computed the way
// llama.cpp computes them for its q8_0 cache: the query is rounded to Q8_0
// and each 32-value block's dot product is taken in exact integers.
//
// Arithmetic (every caller and every instruction set, bit for bit), for a
// query q, a key k of head_dim values (a multiple of 32) and the attention
// scale:
//   q is rounded per 32 values by the kernel table's QuantizeInt8Fn (scale
//     max|q| / 127 in F32, quants nearest-even in [-127, 127]), and each
//     block's scale is multiplied by the attention scale: d_q[b];
//   score = 0;  for b = 0 .. head_dim/32 - 1:
//     score = fma(float(sum of q_q * k_q over block b), d_k[b] * d_q[b], score)
// which is the packed Q8_0 GEMM's arithmetic (packed_q8_0.h) with the keys
// as its weight rows. The keys are packed a chunk at a time
// (PackQ8_0Group, asking for the lines of the keys a few groups ahead)
// into a buffer on the stack and multiplied by the active table's packed
// kernel (VPDPBUSD at the AVX-512 level, AMX for 16 or more queries where
// present). Where the table has scores_q8_0_rows (AVX2, AVX-512), up to
// kScoresQ8_0RowsMaxQueries queries (a decode row's GQA group) take the
// keys straight from their rows, 16 at a time, with the same prefetches
// and the same integers. A key's score depends only on the query and the key, never on
// the batch, the chunk or the instruction set, so prefill's tiles, a
// decode row, forks sharing blocks and the per-query kernel agree to the
// last bit.
//
// Precision: the query's rounding is llama.cpp's own for a q8_0 cache
// (which rounds the scale to F16 as well; kvsession keeps it in F32). On
// the reference models the logits then move from the f16 cache's as far as
// llama.cpp's do (docs/performance.md, "KV types").
//
// Contract: pure, thread-safe; the caller owns every buffer.
#ifndef KVSESSION_KERNELS_ATTENTION_Q8_0_SCORES_H_
#define KVSESSION_KERNELS_ATTENTION_Q8_0_SCORES_H_

#include <cstddef>
#include <cstdint>

#include "kernels/kv_dtype.h"

namespace kvs {

// The longest head this file scores (head_dim % 32 == 0 and at most this:
// KvDtypeFitsHeadDim).
inline constexpr int kQ8_0ScoresMaxHeadDim = kKvQ8_0MaxHeadDim;

// Bytes of one rounded query: head_dim int8 quants, then head_dim / 32 F32
// block scales (attention scale included).
inline constexpr size_t QueryQ8_0Bytes(int head_dim) {
  return static_cast<size_t>(head_dim) + sizeof(float) * (head_dim / 32);
}

// Rounds query q (head_dim floats) for scores with attention scale `scale`
// to QueryQ8_0Bytes(head_dim) bytes at out.
void QuantizeQueryQ8_0(const float* q, int head_dim, float scale, uint8_t* out);

// scores[j * stride + key] = the score of rounded query j (nq of them,
// QueryQ8_0Bytes(head_dim) apart from `queries`) against key `key`, for
// keys [0, n_keys): key i is row i % block_keys of k_blocks[i / block_keys]
// (Q8_0 rows of head_dim values, KvBytes(kQ8_0, head_dim) bytes apart).
void ScoresQ8_0(const uint8_t* queries, int nq, int head_dim, const void* const* k_blocks, int block_keys,
                int n_keys, float* scores, size_t stride);

// ScoresQ8_0 of one F32 query against n_keys keys of one block: scores[j]
// for j < n_keys.
void QueryScoresQ8_0(const float* q, int head_dim, const void* k_block, int n_keys, float scale, float* scores);

}  // namespace kvs

#endif  // KVSESSION_KERNELS_ATTENTION_Q8_0_SCORES_H_
