// RmsNorm (norm.h) at the AVX-512 level: simd_norm.h with the 8 double
// sums of squares in one register (simd_avx512_doubles.h).
// GCC 12 flags its own intrinsics (the intentionally undefined
// pass-through operand of _mm512_cvtps_pd) as maybe-uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/kernel_table.h"
#include "kernels/simd_avx512.h"
#include "kernels/simd_avx512_doubles.h"
#include "kernels/simd_norm.h"

namespace kvs::kernel_table {

void FillAvx512Norm(KernelTable* t) { t->rms_norm = RmsNormSimd<Avx512, Avx512Doubles>; }

}  // namespace kvs::kernel_table
