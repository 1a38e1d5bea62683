// AVX-512 attention update and F16 KV conversion: the generic kernels of
// simd_attention.h. Compiled with the AVX-512 flags; runs only when
// cpu_features.h selects this level.
#include "kernels/kernel_table.h"
#include "kernels/simd_avx512.h"
#include "kernels/simd_attention.h"

namespace kvs::kernel_table {

void FillAvx512Attention(KernelTable* t) { FillAttentionEntries<Avx512>(t); }

}  // namespace kvs::kernel_table
