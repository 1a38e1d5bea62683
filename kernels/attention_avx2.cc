// AVX2 attention update and F16 KV conversion: the generic kernels of
// simd_attention.h and the tiled kernels of simd_attention_tiled.h,
// simd_attention_runs.h and simd_attention_heads.h. Compiled with the AVX2
// flags; runs only when cpu_features.h selects this level.
#include "kernels/kernel_table.h"
#include "kernels/simd_avx2.h"
#include "kernels/simd_attention.h"
#include "kernels/simd_attention_tiled.h"
#include "kernels/simd_attention_heads.h"
#include "kernels/simd_attention_runs.h"

namespace kvs::kernel_table {

void FillAvx2Attention(KernelTable* t) {
  FillTiledAttentionEntries<Avx2>(t);
  t->attention_runs = AttentionRunsTiled<Avx2>;
  t->attention_heads = AttentionHeadsTiled<Avx2>;
}

}  // namespace kvs::kernel_table
