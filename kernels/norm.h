// RMS normalisation: out = x / sqrt(mean(x^2) + eps) * weight, by the
// active kernel level (kernel_table.h). Every level gives the same bits
// (norm.cc states the order of the sums): prefill, decode and forks agree
// whatever the instruction set.
#ifndef KVSESSION_KERNELS_NORM_H_
#define KVSESSION_KERNELS_NORM_H_

#include <cstdint>

namespace kvs {

// `out` may alias `x`. `weight` may be null (plain normalisation).
void RmsNorm(const float* x, const float* weight, float eps, int64_t n, float* out);

}  // namespace kvs

#endif  // KVSESSION_KERNELS_NORM_H_
