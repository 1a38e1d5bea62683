// SoftmaxDenominator (softmax_denominator.h) at the AVX512 level: eight
// double lanes in one register (simd_avx512_doubles.h).
// GCC 12 flags its own intrinsics (intentionally undefined pass-through
// operands of _mm512_cvtps_pd and _mm512_slli_epi64) as maybe-uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include "kernels/kernel_table.h"
#include "kernels/simd_avx512_doubles.h"
#include "kernels/simd_softmax_denominator.h"

namespace kvs::kernel_table {
namespace {

struct Avx512SoftmaxDoubles : Avx512Doubles {
  static V Weights8(const float* x, float max) {
    const __m512d d = _mm512_cvtps_pd(_mm256_sub_ps(_mm256_loadu_ps(x), _mm256_set1_ps(max)));
    const __mmask8 live = _mm512_cmp_pd_mask(d, _mm512_set1_pd(kExpLowest), _CMP_GE_OQ);  // false for NaN
    return _mm512_maskz_mov_pd(live, ExpOfNonPositiveLanes<Avx512Doubles>(d));
  }
};

}  // namespace

void FillAvx512SoftmaxDenominator(KernelTable* t) {
  t->softmax_denominator = SoftmaxDenominatorSimd<Avx512SoftmaxDoubles>;
}

}  // namespace kvs::kernel_table
