// Internal to kernels/: SoftmaxDenominator (softmax_denominator.h) for one
// level, generic over its "8 double lanes" traits D: V, Zero, Add,
// Weights8(x, max) = the 8 weights w_i of x[0, 8) (0 for NaN and for
// d < kExpLowest; the SIMD levels build them with exp_of_non_positive.h)
// and Store(double[8], V). Include after the traits, from the level's own
// translation unit (the scalar level's too, so every level sums in one
// order), compiled with -ffp-contract=off.
#ifndef KVSESSION_KERNELS_SIMD_SOFTMAX_DENOMINATOR_H_
#define KVSESSION_KERNELS_SIMD_SOFTMAX_DENOMINATOR_H_

#include <cstdint>
#include <limits>

#include "kernels/exp_of_non_positive.h"

namespace kvs {
namespace {

// Lane j of the running sum takes the weights of x_i, i = j (mod 8), in
// increasing i; a short last group is padded with NaN (weight 0, and
// p + 0 = p for the sums, which are never -0).
template <class D>
double SoftmaxDenominatorSimd(const float* x, int64_t n, float max) {
  typename D::V sum = D::Zero();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) sum = D::Add(sum, D::Weights8(x + i, max));
  if (i < n) {
    float tail[8];
    for (int j = 0; j < 8; ++j) tail[j] = i + j < n ? x[i + j] : std::numeric_limits<float>::quiet_NaN();
    sum = D::Add(sum, D::Weights8(tail, max));
  }
  alignas(64) double p[8];
  D::Store(p, sum);
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_SIMD_SOFTMAX_DENOMINATOR_H_
