// RMS normalisation: out = x / sqrt(mean(x^2) + eps) * weight.
#ifndef KVSESSION_KERNELS_NORM_H_
#define KVSESSION_KERNELS_NORM_H_

#include <cstdint>

namespace kvs {

// `out` may alias `x`. `weight` may be null (plain normalisation).
void RmsNorm(const float* x, const float* weight, float eps, int64_t n, float* out);

}  // namespace kvs

#endif  // KVSESSION_KERNELS_NORM_H_
