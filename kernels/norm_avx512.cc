// RmsNorm (norm.h) at the AVX-512 level: the 8 double sums of squares in
// one register (simd_norm.h).
// GCC 12 flags its own intrinsics (the intentionally undefined
// pass-through operand of _mm512_cvtps_pd) as maybe-uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include "kernels/kernel_table.h"
#include "kernels/simd_avx512.h"
#include "kernels/simd_norm.h"

namespace kvs::kernel_table {
namespace {

struct Avx512Squares {
  using V = __m512d;
  static V Zero() { return _mm512_setzero_pd(); }
  static V AddSquares8(V sum, const float* x) {
    const __m512d d = _mm512_cvtps_pd(_mm256_loadu_ps(x));
    return _mm512_add_pd(sum, _mm512_mul_pd(d, d));
  }
  static void Store(double* p, V v) { _mm512_store_pd(p, v); }
};

}  // namespace

void FillAvx512Norm(KernelTable* t) { t->rms_norm = RmsNormSimd<Avx512, Avx512Squares>; }

}  // namespace kvs::kernel_table
