// RmsNorm (norm.h) at the AVX2 level: the 8 double sums of squares in two
// registers (simd_norm.h).
#include <immintrin.h>

#include "kernels/kernel_table.h"
#include "kernels/simd_avx2.h"
#include "kernels/simd_norm.h"

namespace kvs::kernel_table {
namespace {

struct Avx2Squares {
  struct V {
    __m256d lo, hi;  // lanes 0-3, 4-7
  };
  static V Zero() { return {_mm256_setzero_pd(), _mm256_setzero_pd()}; }
  static V AddSquares8(V sum, const float* x) {
    const __m256 f = _mm256_loadu_ps(x);
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(f)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
    return {_mm256_add_pd(sum.lo, _mm256_mul_pd(lo, lo)), _mm256_add_pd(sum.hi, _mm256_mul_pd(hi, hi))};
  }
  static void Store(double* p, V v) {
    _mm256_store_pd(p, v.lo);
    _mm256_store_pd(p + 4, v.hi);
  }
};

}  // namespace

void FillAvx2Norm(KernelTable* t) { t->rms_norm = RmsNormSimd<Avx2, Avx2Squares>; }

}  // namespace kvs::kernel_table
