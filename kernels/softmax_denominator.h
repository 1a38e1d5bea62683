// The denominator of a softmax over a vocabulary, for sampling with top-k
// off: SoftmaxDenominator(x, n, max) = the sum over the non-NaN x_i of
// e^(x_i - max), in double, in an order fixed by the indexes alone, so no
// sort is needed first and every kernel level gives the same bits.
//
// Arithmetic (every level, bit for bit):
//   d_i  = double(float(x_i - max))        (the float difference, widened)
//   w_i  = ExpOfNonPositive(d_i), or 0 for a NaN x_i
//   p_j  = sum of w_i over i = j (mod 8), in increasing i, from +0
//          (j = 0 .. 7: eight running sums, as eight double lanes hold them)
//   result = ((p_0 + p_1) + (p_2 + p_3)) + ((p_4 + p_5) + (p_6 + p_7))
// ExpOfNonPositive is this file's own e^d for d <= 0 in double (within a
// few ulp of std::exp; tested), computed with IEEE additions and
// multiplications only: d < -708 (e^d below 3.3e-308) and -inf give 0.
// The SIMD levels run those very operations on 8 (AVX-512) or 2 x 4 (AVX2)
// double lanes (simd_softmax_denominator.h, compiled without fused
// multiply-adds), so their bits are the scalar level's.
//
// Cost: one pass over x; 151,936 logits take 173 us at the AVX-512 level
// on Zen 4 and 298 us at AVX2 (std::exp summed in a loop: 791 us;
// kvs-bench-kernels --benchmark_filter='softmax_denominator|exp_sum').
//
// Contract: pure, thread-safe, allocates nothing. `max` must be >= every
// non-NaN x_i and finite (the sampler passes the largest logit).
#ifndef KVSESSION_KERNELS_SOFTMAX_DENOMINATOR_H_
#define KVSESSION_KERNELS_SOFTMAX_DENOMINATOR_H_

#include <cstdint>

namespace kvs {

// e^d for d <= 0 (see above); 0 for d < -708 and for -inf.
double ExpOfNonPositive(double d);

// The sum of e^(x_i - max) over the non-NaN x_i of x[0, n), as above.
double SoftmaxDenominator(const float* x, int64_t n, float max);

// The scalar level's entry (the reference the SIMD ones match).
double SoftmaxDenominatorScalar(const float* x, int64_t n, float max);

}  // namespace kvs

#endif  // KVSESSION_KERNELS_SOFTMAX_DENOMINATOR_H_
