// RmsNorm (norm.h) at the AVX2 level: simd_norm.h with the 8 double sums
// of squares in two registers (simd_avx2_doubles.h).
#include "kernels/kernel_table.h"
#include "kernels/simd_avx2.h"
#include "kernels/simd_avx2_doubles.h"
#include "kernels/simd_norm.h"

namespace kvs::kernel_table {

void FillAvx2Norm(KernelTable* t) { t->rms_norm = RmsNormSimd<Avx2, Avx2Doubles>; }

}  // namespace kvs::kernel_table
