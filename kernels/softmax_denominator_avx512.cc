// SoftmaxDenominator (softmax_denominator.h) at the AVX512 level: eight
// double lanes in one register.
// GCC 12 flags its own intrinsics (intentionally undefined pass-through
// operands of _mm512_cvtps_pd and _mm512_slli_epi64) as maybe-uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include "kernels/kernel_table.h"
#include "kernels/simd_softmax_denominator.h"

namespace kvs::kernel_table {
namespace {

struct Avx512Doubles {
  using V = __m512d;
  static V Zero() { return _mm512_setzero_pd(); }
  static V Set1(double x) { return _mm512_set1_pd(x); }
  static V Add(V a, V b) { return _mm512_add_pd(a, b); }
  static V Sub(V a, V b) { return _mm512_sub_pd(a, b); }
  static V Mul(V a, V b) { return _mm512_mul_pd(a, b); }
  static V ScaleByPowerOfTwo(V p, V t) {
    const __m512i bits = _mm512_slli_epi64(_mm512_add_epi64(_mm512_castpd_si512(t), _mm512_set1_epi64(1023)), 52);
    return _mm512_mul_pd(p, _mm512_castsi512_pd(bits));
  }
  static V Weights8(const float* x, float max) {
    const __m512d d = _mm512_cvtps_pd(_mm256_sub_ps(_mm256_loadu_ps(x), _mm256_set1_ps(max)));
    const __mmask8 live = _mm512_cmp_pd_mask(d, _mm512_set1_pd(kExpLowest), _CMP_GE_OQ);  // false for NaN
    return _mm512_maskz_mov_pd(live, ExpOfNonPositiveLanes<Avx512Doubles>(d));
  }
  static void Store(double* p, V v) { _mm512_store_pd(p, v); }
};

}  // namespace

void FillAvx512SoftmaxDenominator(KernelTable* t) {
  t->softmax_denominator = SoftmaxDenominatorSimd<Avx512Doubles>;
}

}  // namespace kvs::kernel_table
