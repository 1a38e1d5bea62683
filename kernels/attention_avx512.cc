// AVX-512 attention update and F16 KV conversion: the generic kernels of
// simd_attention.h and the tiled kernels of simd_attention_tiled.h,
// simd_attention_runs.h and simd_attention_heads.h. Compiled with the AVX-512 flags; runs only when
// cpu_features.h selects this level and the CPU lacks AVX512-BF16
// (otherwise attention_avx512_bf16.cc's entries replace these).
#include "kernels/kernel_table.h"
#include "kernels/simd_avx512.h"
#include "kernels/simd_attention.h"
#include "kernels/simd_attention_tiled.h"
#include "kernels/simd_attention_heads.h"
#include "kernels/simd_attention_runs.h"

namespace kvs::kernel_table {

void FillAvx512Attention(KernelTable* t) {
  FillTiledAttentionEntries<Avx512>(t);
  t->attention_runs = AttentionRunsTiled<Avx512>;
  t->attention_heads = AttentionHeadsTiled<Avx512>;
}

}  // namespace kvs::kernel_table
