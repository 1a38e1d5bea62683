#include "kernels/norm.h"

#include <cmath>

#include "kernels/kernel_table.h"

namespace kvs {

namespace {

// The scalar level. The sum of squares is taken in double (the sum of a 4096-wide row loses
// digits in F32), as 8 interleaved partial sums (element i < n - n % 8
// into sum i % 8, the last n % 8 into a ninth) added in that order at the
// end: a fixed order, so the same bits on every machine, and independent
// additions, so it runs at the adder's throughput rather than its latency
// (one running sum made RmsNorm 2.6% of a fan-out step's samples, for 8
// rows of 1,024 values and the per-head q/k norms). The SIMD levels
// (simd_norm.h) keep these bits; compiled for the baseline ISA this loop
// was still 3.0% of a fan-out step's samples (docs/performance/zen5.md, "Fan-out's
// 8 rows in one tile of one group, and norms at every level").
void RmsNormScalar(const float* x, const float* weight, float eps, int64_t n, float* out) {
  // Named partial sums (GCC keeps an array of them in memory).
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
  auto sq = [x](int64_t i) { return static_cast<double>(x[i]) * x[i]; };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    s0 += sq(i), s1 += sq(i + 1), s2 += sq(i + 2), s3 += sq(i + 3);
    s4 += sq(i + 4), s5 += sq(i + 5), s6 += sq(i + 6), s7 += sq(i + 7);
  }
  double rest = 0;
  for (; i < n; ++i) rest += sq(i);
  const double sum = s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7 + rest;
  const float scale = static_cast<float>(1.0 / std::sqrt(sum / n + eps));
  if (weight != nullptr) {
    for (i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
  } else {
    for (i = 0; i < n; ++i) out[i] = x[i] * scale;
  }
}

}  // namespace

void RmsNorm(const float* x, const float* weight, float eps, int64_t n, float* out) {
  kernel_table::ActiveKernelTable().rms_norm(x, weight, eps, n, out);
}

namespace kernel_table {

void FillScalarNorm(KernelTable* t) { t->rms_norm = RmsNormScalar; }

}  // namespace kernel_table
}  // namespace kvs
