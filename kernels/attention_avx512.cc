// AVX-512 attention update and F16 KV conversion: the generic kernels of
// simd_attention.h and the tiled kernels of simd_attention_tiled.h,
// simd_attention_runs.h and simd_attention_heads.h, with a Q8_0 cache's
// values folded in int16 groups, two keys at a time by VPDPWSSD
// (attention_q8_0_values.h). Every vector attention entry of the level
// comes from this file, so all of a process's kernels make the same
// groups. Compiled with the AVX-512 flags; runs when cpu_features.h
// selects this level (AMX attention, where enabled, replaces some entries:
// attention_amx.cc).
#include "kernels/kernel_table.h"
#include "kernels/simd_avx512_int16_groups.h"
#include "kernels/simd_attention.h"
#include "kernels/simd_attention_tiled.h"
#include "kernels/simd_attention_heads.h"
#include "kernels/simd_attention_runs.h"

namespace kvs::kernel_table {

void FillAvx512Attention(KernelTable* t) {
  FillTiledAttentionEntries<Avx512Int16Groups>(t);
  t->attention_runs = AttentionRunsTiled<Avx512Int16Groups>;
  t->attention_heads = AttentionHeadsTiled<Avx512Int16Groups>;
  t->q8_0_value_groups = true;
}

}  // namespace kvs::kernel_table
