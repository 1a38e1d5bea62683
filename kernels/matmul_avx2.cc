// AVX2 exact-path matmul and dequantization for every weight type: the
// generic kernels of simd_matmul.h at 8 lanes. Compiled with the AVX2 flags;
// runs only when cpu_features.h selects kAvx2.
#include "kernels/kernel_table.h"
#include "kernels/simd_avx2.h"
#include "kernels/simd_matmul.h"

namespace kvs::kernel_table {

void FillAvx2Matmul(KernelTable* t) { FillFloatMatmulEntries<Avx2>(t); }

}  // namespace kvs::kernel_table
