// AVX-512 attention for the level with AVX512-BF16: the kernels of
// attention_avx512.cc with a Q8_0 cache's values folded in int16 groups,
// two keys at a time by VPDPWSSD (attention_q8_0_values.h). Every
// attention entry of the table comes from this file, so all of a process's
// kernels make the same groups. Compiled with -mavx512bf16 in a file of
// its own (the level's flags); used only when the CPU has AVX512-BF16.
#include "kernels/kernel_table.h"
#include "kernels/simd_avx512_bf16.h"
#include "kernels/simd_attention.h"
#include "kernels/simd_attention_tiled.h"
#include "kernels/simd_attention_heads.h"
#include "kernels/simd_attention_runs.h"

namespace kvs::kernel_table {

void FillAvx512Bf16Attention(KernelTable* t) {
  FillTiledAttentionEntries<Avx512Bf16>(t);
  t->attention_runs = AttentionRunsTiled<Avx512Bf16>;
  t->attention_heads = AttentionHeadsTiled<Avx512Bf16>;
  t->q8_0_value_groups = true;
}

}  // namespace kvs::kernel_table
