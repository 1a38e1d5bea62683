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
// as its weight rows. The cache holds its keys in that GEMM's order
// already (q8_0_kv_blocks.h: a packed group per 16 slots, the scales
// unpadded), so up to kScoresQ8_0GroupMaxQueries queries (a decode row's
// GQA group) are scored group by group where the keys lie, by the active
// table's group kernel (AVX2, AVX-512; elsewhere as many queries are),
// asking for the lines of the group two on; more queries (prefill, forks
// sharing a prompt) copy chunks of groups into a packed buffer on the
// stack and multiply them by the table's packed kernel (VPDPBUSD at the
// AVX-512 level, AMX for 16 or more queries where present).
// A key's score depends only on the query and the key, never on
// the batch, the chunk or the instruction set, so prefill's tiles, a
// decode row, forks sharing blocks and the per-query kernel agree to the
// last bit.
//
// Precision: the query's rounding is llama.cpp's own for a q8_0 cache
// (which rounds the scale to F16 as well; kvsession keeps it in F32). On
// the reference models the logits then move from the f16 cache's as far as
// llama.cpp's do (docs/performance/kv-types.md, "KV types").
//
// Contract: pure, thread-safe; the caller owns every buffer.
#ifndef KVSESSION_KERNELS_ATTENTION_Q8_0_SCORES_H_
#define KVSESSION_KERNELS_ATTENTION_Q8_0_SCORES_H_

#include <cstddef>
#include <cstdint>

#include "kernels/kv_dtype.h"
#include "kernels/q8_0_kv_blocks.h"

namespace kvs {

// The longest head this file scores (head_dim % 32 == 0 and at most this:
// KvDtypeFitsHeadDim).
inline constexpr int kQ8_0ScoresMaxHeadDim = kKvQ8_0MaxHeadDim;

// Bytes of one rounded query: head_dim int8 quants, then head_dim / 32 F32
// block scales (attention scale included), then head_dim / 16 int16 sums
// of each 16 quants (the layout of a Q8_0 activation row, matmul.h, which
// the packed kernels read).
inline constexpr size_t QueryQ8_0Bytes(int head_dim) {
  return static_cast<size_t>(head_dim) + sizeof(float) * (head_dim / 32) + sizeof(int16_t) * (head_dim / 16);
}

// Rounds query q (head_dim floats) for scores with attention scale `scale`
// to QueryQ8_0Bytes(head_dim) bytes at out.
void QuantizeQueryQ8_0(const float* q, int head_dim, float scale, uint8_t* out);

// scores[j * stride + key] = the score of rounded query j (nq of them,
// QueryQ8_0Bytes(head_dim) apart from `queries`) against key `key`, for
// keys [0, n_keys): key i is slot i % block_keys of the key block
// k_blocks[i / block_keys] (q8_0_kv_blocks.h; block_keys a multiple of
// 16, or any count for keys of one block). Every group the keys touch is
// read whole; slots past n_keys are never written.
void ScoresQ8_0(const uint8_t* queries, int nq, int head_dim, const void* const* k_blocks, int block_keys,
                int n_keys, float* scores, size_t stride);

// ScoresQ8_0 of one F32 query against n_keys keys of one key block
// (its first n_keys slots): scores[j] for j < n_keys.
void QueryScoresQ8_0(const float* q, int head_dim, const void* k_block, int n_keys, float scale, float* scores);

// The scalar level's scores of one key group (kernel_table.h
// ScoresQ8_0GroupFn; the reference the SIMD group kernels are tested
// against): the group copied as a packed group, then
// MatmulPackedQ8_0Scalar.
void ScoresQ8_0GroupScalar(const uint8_t* group, int n_rows, int64_t head_dim, const uint8_t* queries,
                           size_t query_bytes, size_t scales_offset, int nq, float* scores, int64_t stride,
                           const uint8_t* ahead, size_t ahead_bytes);

}  // namespace kvs

#endif  // KVSESSION_KERNELS_ATTENTION_Q8_0_SCORES_H_
