// Attention on AMX: the AVX-512 level's attention kernels where the CPU has
// AMX-BF16 (Sapphire Rapids and later), for BF16 and Q8_0 caches, when
// chosen (attention.h UseAmxAttention; off by default). Then every
// attention entry of that level's table (the tiled kernel, the per-query
// one, forks' runs) goes through these kernels for a head they take
// (AmxAttentionTakes), so prefill's tiles, a decode row and forks sharing
// pages keep one arithmetic: the determinism contract of attention.h
// holds on AMX as on every level. F32 and F16 caches, and
// heads of other sizes, keep the AVX-512 kernels: AMX has no F16 products
// before Granite Rapids, and an F16 key or value is two BF16 parts, which
// made the products of an exact split (5 per slice) and the conversions
// cost a decode row 2.5x the vector kernel's time (docs/performance/sapphire-rapids.md,
// "Attention on AMX").
//
// Arithmetic. Products run as TDPBF16PS: 16 x 16 F32 sums of BF16 pair
// products over 32 values of the reduction, added into F32 accumulators by
// the tile unit in an order of its own (it is not VDPBF16PS's pair by pair
// rounding; results are repeatable, and one accumulator's result depends
// only on its own row and column, never on the others in the tile). So
// that no number is rounded beyond what the F32 kernels round, every F32
// operand is split exactly into BF16 parts and the products of the parts
// are summed:
//   x = x1 + x2 + x3   (x1 = bf16(x), x2 = bf16(x - x1), x3 = bf16(x - x1 -
//                       x2): exact for an F32 x, subnormals aside)
// and a stored BF16 key or value is one part. Every product is exact.
//   scores (BF16 keys): for each part p, C_p = the sum over the head's
//     32-value slices, in order, of k.q_p; then score = scale * ((C_1 +
//     C_2) + C_3) in F32. Q8_0 keys keep attention_q8_0_scores.h's exact
//     integers.
//   values (BF16): the weights p = e^(score - max) split the same way; for
//     each chunk of keys, C += p1.v, p2.v, p3.v. Q8_0 values: the weights
//     of attention_q8_0_values.h (p times the value block's scale, rounded
//     to BF16) times the int8 quants, one product, C += w.q.
// A chunk is the keys [32c, 32c + 32) of the sequence, across pages when a
// page holds fewer (or a number not a multiple of 32), whatever the query
// sees: a key the query does not see has weight 0, which leaves its
// accumulators' bits unchanged (as does a chunk it sees none of). So a
// query's result depends only on its own query, keys, values and visible
// count, as attention.h requires, and not on the page size: forks that
// share a prompt's pages share them in parts of whole chunks.
//
// Precision: within ~1e-6 relative of the F32 kernels (another summation
// order, as between instruction sets); tests hold it to the scalar
// reference as every level.
//
// Contract: pure, thread-safe (each thread's tile registers are its own);
// the caller owns every buffer. Only for AmxBf16Available() (amx_tiles.h).
#ifndef KVSESSION_KERNELS_ATTENTION_AMX_H_
#define KVSESSION_KERNELS_ATTENTION_AMX_H_

#include "kernels/kv_dtype.h"

namespace kvs {

// The longest head the AMX kernels take (its converted keys and values
// live on the stack).
inline constexpr int kAmxAttentionMaxHeadDim = 256;

// True when the AMX kernels take a cache of `dtype` with heads of
// `head_dim` values: BF16 or Q8_0, head_dim a multiple of 32 up to
// kAmxAttentionMaxHeadDim.
constexpr bool AmxAttentionTakes(KvDtype dtype, int head_dim) {
  return (dtype == KvDtype::kBF16 || dtype == KvDtype::kQ8_0) && head_dim > 0 && head_dim % 32 == 0 &&
         head_dim <= kAmxAttentionMaxHeadDim;
}

// True when the CPU can run these kernels: AmxBf16Available()
// (amx_tiles.h). Whether they run is AmxAttentionInUse() (attention.h).
bool AmxAttentionAvailable();

}  // namespace kvs

#endif  // KVSESSION_KERNELS_ATTENTION_AMX_H_
