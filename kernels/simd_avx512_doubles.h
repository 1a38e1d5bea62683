// Eight double lanes in one AVX-512 register: the "double lanes" traits D
// that exp_of_non_positive.h, simd_softmax_denominator.h (with its own
// Weights8) and simd_norm.h take. Squares8(x) is the squares of x[0, 8) in
// double (exact: a float's square fits a double's significand).
//
// Include only from translation units compiled with the AVX-512 flags and
// -ffp-contract=off (kernels/CMakeLists.txt); anonymous namespace, as
// simd_avx512.h.
#ifndef KVSESSION_KERNELS_SIMD_AVX512_DOUBLES_H_
#define KVSESSION_KERNELS_SIMD_AVX512_DOUBLES_H_

#include <immintrin.h>

namespace kvs {
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
  static V Squares8(const float* x) {
    const __m512d d = _mm512_cvtps_pd(_mm256_loadu_ps(x));
    return _mm512_mul_pd(d, d);
  }
  static void Store(double* p, V v) { _mm512_store_pd(p, v); }  // p 64-byte aligned
};

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_SIMD_AVX512_DOUBLES_H_
