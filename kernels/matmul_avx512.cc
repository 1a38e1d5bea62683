// AVX-512 exact-path matmul and dequantization for every weight type: the
// generic kernels of simd_matmul.h at 16 lanes. Compiled with the AVX-512
// flags; runs only when cpu_features.h selects kAvx512.
#include "kernels/kernel_table.h"
#include "kernels/simd_avx512.h"
#include "kernels/simd_matmul.h"

namespace kvs::kernel_table {

void FillAvx512Matmul(KernelTable* t) { FillFloatMatmulEntries<Avx512>(t); }

}  // namespace kvs::kernel_table
