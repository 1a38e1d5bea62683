#include "kernels/softmax_denominator.h"

#include <cstring>

#include "kernels/exp_of_non_positive.h"
#include "kernels/kernel_table.h"

namespace kvs {
namespace {

// One double lane: the scalar level (this file is compiled for baseline
// x86-64, which has no fused multiply-add to contract into).
struct ScalarDouble {
  using V = double;
  static V Set1(double x) { return x; }
  static V Add(V a, V b) { return a + b; }
  static V Sub(V a, V b) { return a - b; }
  static V Mul(V a, V b) { return a * b; }
  static V ScaleByPowerOfTwo(V p, V t) {
    uint64_t bits;
    std::memcpy(&bits, &t, sizeof bits);
    bits = (bits + 1023) << 52;  // 2^k: t's low bits hold k (kRoundMagic's carry out of the top)
    double scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
  }
};

}  // namespace

double ExpOfNonPositive(double d) {
  if (!(d >= kExpLowest)) return 0.0;  // also -inf and NaN
  return ExpOfNonPositiveLanes<ScalarDouble>(d);
}

double SoftmaxDenominatorScalar(const float* x, int64_t n, float max) {
  double p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < n; ++i) {
    const float diff = x[i] - max;
    p[i & 7] += ExpOfNonPositive(static_cast<double>(diff));
  }
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

double SoftmaxDenominator(const float* x, int64_t n, float max) {
  return kernel_table::ActiveKernelTable().softmax_denominator(x, n, max);
}

namespace kernel_table {

void FillScalarSoftmaxDenominator(KernelTable* t) { t->softmax_denominator = SoftmaxDenominatorScalar; }

}  // namespace kernel_table
}  // namespace kvs
