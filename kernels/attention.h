// Attention over a KV cache stored in blocks (pages), with an online
// (flash-style) softmax so no score row longer than one block ever exists.
//
// A caller attends nq query vectors to a sequence's keys by:
//   AttentionInit(...);
//   for each block of keys: AttentionUpdate(... block ...);
//   AttentionFinish(...);
// The running state per query is (max score m, sum of exp l, weighted value
// sum acc). For grouped-query attention the caller passes every query head
// that shares one KV head in the same call, so each K/V block is read and
// converted once per group.
//
// Contract: pure; the caller owns every buffer (state and scratch). Runs the
// active kernels (cpu_features.h): the SIMD versions agree with the scalar
// reference to ~1e-6 relative (a vectorized exp, other summation orders;
// against a q8_0 cache each key's value weight is rounded to BF16,
// attention_q8_0_values.h, so a weight within that much of a rounding
// midpoint may round the other way, a 2^-8 relative step of it; where
// Q8_0ValuesInInt16Groups, the weights are int16 steps of their group's
// largest instead: each within 2^-14 of the group's largest of the
// exact weight, where the scalar level's is within 2^-8 of itself).
// Each query's result depends only on its own query, the keys/values and
// its visible count, never on the other rows or heads in the call.
#ifndef KVSESSION_KERNELS_ATTENTION_H_
#define KVSESSION_KERNELS_ATTENTION_H_

#include <cstddef>
#include <cstdint>

#include "kernels/attention_run.h"
#include "kernels/kv_dtype.h"

namespace kvs {

// Converts n values between F32 and the cache's element type (kv_dtype.h;
// for q8_0, n is a multiple of 32 and the values are head_dim-long rows
// laid end to end). LoadKv gives the exact F32 value of each stored one,
// the value every attention kernel computes with; StoreKv rounds to
// nearest (q8_0 as llama.cpp rounds its Q8_0 cache: per 32 values, scale
// max|x| / 127 stored as F16, quants x * 127 / max|x| to nearest), with the
// same bits on every instruction set.
void StoreKv(KvDtype dtype, const float* src, void* dst, int64_t n);
void LoadKv(KvDtype dtype, const void* src, float* dst, int64_t n);

// Floats of scratch AttentionUpdate needs for blocks of up to `block_keys`
// (with `heads` query heads per row, at least block_keys * heads).
size_t AttentionScratchFloats(int block_keys, int head_dim);

// Queries come in rows (one token each) of `heads` query heads that share
// one KV head: query (r, h) is at q + r * q_row_stride + h * head_dim, and
// its state is index i = r * heads + h in `max`/`sum` and
// acc + i * head_dim.

// Resets the state of nq = rows * heads queries: max = -inf, sum = 0, acc = 0.
void AttentionInit(int nq, int head_dim, float* max, float* sum, float* acc);

// Folds one block of keys/values into the state of rows * heads queries.
//   k, v: the block, n_keys rows of head_dim values of `dtype`, contiguous
//      (a row is KvBytes(dtype, head_dim) bytes). A q8_0 block is not rows
//      but a page's blocks of n_keys slots as q8_0_kv_blocks.h orders them
//      (head_dim % 32 == 0; the key block's last group whole, so n_keys a
//      multiple of 16 or room for it).
//   visible[r]: how many leading keys of this block row r may see (causal
//      mask); 0 skips the row for this block.
//   scores are scale * dot(q, k); against a q8_0 cache, with q rounded to
//      Q8_0 as llama.cpp rounds it (attention_q8_0_scores.h).
//   scratch: AttentionScratchFloats(n_keys, head_dim) floats.
void AttentionUpdate(KvDtype dtype, const float* q, int64_t q_row_stride, int rows, int heads,
                     const void* k, const void* v, int n_keys, int head_dim, const int* visible,
                     float scale, float* max, float* sum, float* acc, float* scratch);

// Folds several blocks (e.g. the pages of a sequence, in order) into the
// state in one online-softmax step: all the scores of a query first, then
// one rescale and one pass over the values. Block b holds block_keys keys
// (the last may be partly filled; a q8_0 block is laid out as
// q8_0_kv_blocks.h orders a page of block_keys slots, block_keys a
// multiple of 16); visible[r] counts the keys row r sees
// from the start of block 0. Keys and values are read in place (F16, BF16
// and Q8_0 converted in registers, exactly). The bits do not depend on
// how the keys are split into blocks of a multiple of 16 keys (the
// default page): the vector levels score keys in groups of their lanes
// within a block and fold Q8_0 values a group of keys [16g, 16g + 16) of
// a block at a time (int16 groups) or key by key, and the AMX kernels
// take keys [32c, 32c + 32) of the sequence as one value product, across
// blocks (attention_amx.h). Other block sizes are correct too, with bits
// of their own (pages of 8 or 24 differ in the last bits on AVX-512).
//   scratch: AttentionBlocksScratchFloats(n_blocks * block_keys, block_keys,
//   head_dim, heads) floats.
void AttentionUpdateBlocks(KvDtype dtype, const float* q, int64_t q_row_stride, int rows, int heads,
                           const void* const* k_blocks, const void* const* v_blocks, int n_blocks,
                           int block_keys, int head_dim, const int* visible, float scale, float* max,
                           float* sum, float* acc, float* scratch);
size_t AttentionBlocksScratchFloats(int max_keys, int block_keys, int head_dim, int heads);

// AttentionUpdateBlocks for a batch of sequences: runs[i] is runs[i].rows
// consecutive query rows over runs[i].n_blocks blocks of its own, rows
// numbered across the runs in order (row r's query heads at q + r *
// q_row_stride, its state index r * heads + h, visible[r] counted from
// its run's first block). Every query gets the bits a separate
// AttentionUpdateBlocks call per run gives it, so results never depend on
// the batch.
// Consecutive runs whose leading blocks are the same pages (forks of one
// prompt decoding together) are folded as one tile over those blocks
// (AttentionSharedBlocks), every query of those runs sharing each K and V
// vector loaded (and converted), then each run over the rest of its
// blocks.
//   scratch: AttentionBlocksScratchFloats(most keys of a run, block_keys,
//   head_dim, heads) floats.
void AttentionUpdateRuns(KvDtype dtype, const float* q, int64_t q_row_stride, const AttentionRun* runs,
                         int n_runs, int heads, int block_keys, int head_dim, const int* visible,
                         float scale, float* max, float* sum, float* acc, float* scratch);

// AttentionUpdateBlocks for one row (a decode step) of kv_heads KV heads
// at once: query head j of KV head h at q + (h * heads + j) * head_dim,
// its state index h * heads + j (max, sum, acc + index * head_dim); KV
// head h's blocks at k_blocks + h * n_blocks and v_blocks + h * n_blocks;
// the row sees `visible` keys. The kernel takes the heads in turn over
// spans of a few blocks, so where the heads' blocks of a page lie side by
// side (the pool's layout: cache/kv_geometry.h) one thread reads them as
// one run. Every query gets the bits of an AttentionUpdateBlocks call per
// head.
//   scratch: AttentionBlocksScratchFloats(n_blocks * block_keys,
//   block_keys, head_dim, heads) floats.
void AttentionUpdateHeads(KvDtype dtype, const float* q, int heads, int kv_heads, const void* const* k_blocks,
                          const void* const* v_blocks, int n_blocks, int block_keys, int head_dim, int visible,
                          float scale, float* max, float* sum, float* acc, float* scratch);

// How many leading blocks AttentionUpdateRuns folds as one tile: blocks
// that every run has as the same K and V pages and that every row sees
// whole, leaving each row at least one key after them; 0 for a single run.
int AttentionSharedBlocks(const AttentionRun* runs, int n_runs, int block_keys, const int* visible);

// Which kernel calls with many queries (prefill) take: the tiled one
// (default: a tile of queries shares each K and V load) or the per-query
// one (the decode kernel), for comparisons. Both give the same bits for
// every query, so this changes speed only. The environment variable
// KVS_ATTENTION=per-query starts a process with the per-query kernel.
// Thread-safe; calls already running keep the kernel they started with.
void UseTiledAttention(bool tiled);
bool TiledAttentionInUse();

// Whether the AVX-512 level folds BF16 and Q8_0 caches on AMX where the
// CPU has AMX-BF16 (attention_amx.h) rather than by its vector kernels
// (the default). On AMX a long prompt prefills faster (the attention of an
// 8,192-token prefill about twice as fast on Sapphire Rapids), but a
// decode row, two queries per KV head, leaves most of every AMX product
// unused and takes longer (about 1.2-1.3x the vector kernel's time):
// docs/performance/sapphire-rapids.md, "Attention on AMX". The two differ in summation
// order, as instruction sets do, so a process chooses once, before it
// computes KV it keeps: kvsessiond --amx-attention, or the environment
// variable KVS_AMX_ATTENTION=1 at start. UseAmxAttention(true) returns
// false (and changes nothing) where the CPU has no AMX-BF16. Thread-safe;
// calls already running keep the kernels they started with.
bool UseAmxAttention(bool on);
bool AmxAttentionInUse();

// True when the active kernels fold a cache of `dtype` with heads of
// `head_dim` values on AMX: AmxAttentionInUse(), the AVX-512 level, and a
// cache and head the AMX kernels take (attention_amx.h).
bool AttentionUsesAmx(KvDtype dtype, int head_dim);

// True when the active kernels fold the values of a q8_0 cache with heads
// of `head_dim` values in int16 groups (attention_q8_0_values.h: the
// AVX-512 level, heads of 32, 64, 128 or 256 values, not on AMX); false:
// BF16 weights.
bool Q8_0ValuesInInt16Groups(int head_dim);

// Writes query (r, h)'s result acc / sum to out + r * out_row_stride + h * head_dim.
void AttentionFinish(int rows, int heads, int head_dim, const float* sum, const float* acc,
                     float* out, int64_t out_row_stride);

}  // namespace kvs

#endif  // KVSESSION_KERNELS_ATTENTION_H_
