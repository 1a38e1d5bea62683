// SoftmaxDenominator (softmax_denominator.h) at the AVX2 level: eight
// double lanes in two registers.
#include <immintrin.h>

#include "kernels/kernel_table.h"
#include "kernels/simd_softmax_denominator.h"

namespace kvs::kernel_table {
namespace {

struct Avx2Doubles {
  struct V {
    __m256d lo, hi;  // lanes 0-3, 4-7
  };
  static V Zero() { return {_mm256_setzero_pd(), _mm256_setzero_pd()}; }
  static V Set1(double x) { return {_mm256_set1_pd(x), _mm256_set1_pd(x)}; }
  static V Add(V a, V b) { return {_mm256_add_pd(a.lo, b.lo), _mm256_add_pd(a.hi, b.hi)}; }
  static V Sub(V a, V b) { return {_mm256_sub_pd(a.lo, b.lo), _mm256_sub_pd(a.hi, b.hi)}; }
  static V Mul(V a, V b) { return {_mm256_mul_pd(a.lo, b.lo), _mm256_mul_pd(a.hi, b.hi)}; }
  static __m256d Scale(__m256d p, __m256d t) {
    const __m256i bits = _mm256_slli_epi64(_mm256_add_epi64(_mm256_castpd_si256(t), _mm256_set1_epi64x(1023)), 52);
    return _mm256_mul_pd(p, _mm256_castsi256_pd(bits));
  }
  static V ScaleByPowerOfTwo(V p, V t) { return {Scale(p.lo, t.lo), Scale(p.hi, t.hi)}; }
  static V Weights8(const float* x, float max) {
    const __m256 diff = _mm256_sub_ps(_mm256_loadu_ps(x), _mm256_set1_ps(max));
    const V d = {_mm256_cvtps_pd(_mm256_castps256_ps128(diff)), _mm256_cvtps_pd(_mm256_extractf128_ps(diff, 1))};
    const V e = ExpOfNonPositiveLanes<Avx2Doubles>(d);
    const __m256d lowest = _mm256_set1_pd(kExpLowest);  // the compares are false for NaN
    return {_mm256_and_pd(_mm256_cmp_pd(d.lo, lowest, _CMP_GE_OQ), e.lo),
            _mm256_and_pd(_mm256_cmp_pd(d.hi, lowest, _CMP_GE_OQ), e.hi)};
  }
  static void Store(double* p, V v) {
    _mm256_store_pd(p, v.lo);
    _mm256_store_pd(p + 4, v.hi);
  }
};

}  // namespace

void FillAvx2SoftmaxDenominator(KernelTable* t) { t->softmax_denominator = SoftmaxDenominatorSimd<Avx2Doubles>; }

}  // namespace kvs::kernel_table
