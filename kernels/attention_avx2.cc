// AVX2 attention update and F16 KV conversion: the generic kernels of
// simd_attention.h and the tiled kernel of simd_attention_tiled.h. Compiled with the AVX2 flags; runs only when
// cpu_features.h selects this level.
#include "kernels/kernel_table.h"
#include "kernels/simd_avx2.h"
#include "kernels/simd_attention.h"
#include "kernels/simd_attention_tiled.h"

namespace kvs::kernel_table {

void FillAvx2Attention(KernelTable* t) { FillTiledAttentionEntries<Avx2>(t); }

}  // namespace kvs::kernel_table
