// SoftmaxDenominator (softmax_denominator.h) at the AVX2 level: eight
// double lanes in two registers (simd_avx2_doubles.h).
#include <immintrin.h>

#include "kernels/kernel_table.h"
#include "kernels/simd_avx2_doubles.h"
#include "kernels/simd_softmax_denominator.h"

namespace kvs::kernel_table {
namespace {

struct Avx2SoftmaxDoubles : Avx2Doubles {
  static V Weights8(const float* x, float max) {
    const __m256 diff = _mm256_sub_ps(_mm256_loadu_ps(x), _mm256_set1_ps(max));
    const V d = {_mm256_cvtps_pd(_mm256_castps256_ps128(diff)), _mm256_cvtps_pd(_mm256_extractf128_ps(diff, 1))};
    const V e = ExpOfNonPositiveLanes<Avx2Doubles>(d);
    const __m256d lowest = _mm256_set1_pd(kExpLowest);  // the compares are false for NaN
    return {_mm256_and_pd(_mm256_cmp_pd(d.lo, lowest, _CMP_GE_OQ), e.lo),
            _mm256_and_pd(_mm256_cmp_pd(d.hi, lowest, _CMP_GE_OQ), e.hi)};
  }
};

}  // namespace

void FillAvx2SoftmaxDenominator(KernelTable* t) { t->softmax_denominator = SoftmaxDenominatorSimd<Avx2SoftmaxDoubles>; }

}  // namespace kvs::kernel_table
