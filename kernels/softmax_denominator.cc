#include "kernels/softmax_denominator.h"

#include <cstring>

#include "kernels/exp_of_non_positive.h"
#include "kernels/kernel_table.h"
#include "kernels/simd_softmax_denominator.h"

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

namespace {

// Eight double lanes one at a time, for SoftmaxDenominatorSimd: the
// scalar level sums in the order the SIMD levels do.
struct EightScalarDoubles {
  struct V {
    double lane[8];
  };
  static V Zero() { return V{}; }
  static V Add(V a, V b) {
    for (int j = 0; j < 8; ++j) a.lane[j] += b.lane[j];
    return a;
  }
  static V Weights8(const float* x, float max) {
    V w;
    for (int j = 0; j < 8; ++j) w.lane[j] = ExpOfNonPositive(static_cast<double>(x[j] - max));
    return w;
  }
  static void Store(double* out, V v) {
    for (int j = 0; j < 8; ++j) out[j] = v.lane[j];
  }
};

}  // namespace

double SoftmaxDenominatorScalar(const float* x, int64_t n, float max) {
  return SoftmaxDenominatorSimd<EightScalarDoubles>(x, n, max);
}

double SoftmaxDenominator(const float* x, int64_t n, float max) {
  return kernel_table::ActiveKernelTable().softmax_denominator(x, n, max);
}

namespace kernel_table {

void FillScalarSoftmaxDenominator(KernelTable* t) { t->softmax_denominator = SoftmaxDenominatorScalar; }

}  // namespace kernel_table
}  // namespace kvs
