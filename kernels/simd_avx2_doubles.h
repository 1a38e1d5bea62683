// Eight double lanes in two AVX2 registers (lanes 0-3, 4-7): the "double
// lanes" traits D that exp_of_non_positive.h, simd_softmax_denominator.h
// (with its own Weights8) and simd_norm.h take. Squares8(x) is the squares
// of x[0, 8) in double (exact: a float's square fits a double's
// significand).
//
// Include only from translation units compiled with the AVX2 flags and
// -ffp-contract=off (kernels/CMakeLists.txt); anonymous namespace, as
// simd_avx2.h.
#ifndef KVSESSION_KERNELS_SIMD_AVX2_DOUBLES_H_
#define KVSESSION_KERNELS_SIMD_AVX2_DOUBLES_H_

#include <immintrin.h>

namespace kvs {
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
  static V Squares8(const float* x) {
    const __m256 f = _mm256_loadu_ps(x);
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(f)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
    return {_mm256_mul_pd(lo, lo), _mm256_mul_pd(hi, hi)};
  }
  static void Store(double* p, V v) {  // p 32-byte aligned
    _mm256_store_pd(p, v.lo);
    _mm256_store_pd(p + 4, v.hi);
  }
};

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_SIMD_AVX2_DOUBLES_H_
