// Activations of the feed-forward block.
#ifndef KVSESSION_KERNELS_ACTIVATION_H_
#define KVSESSION_KERNELS_ACTIVATION_H_

#include <cstdint>

namespace kvs {

// SwiGLU: gate[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + exp(-x)),
// by the active kernel level (kernel_table.h): libm's expf at the scalar
// level, simd_exp.h's at AVX2 and AVX-512 (within a few ulps of the
// scalar level's values). Each value depends only on gate[i] and up[i].
void SiluMul(float* gate, const float* up, int64_t n);

// x[i] += y[i] (the same bits at every level).
void AddInPlace(float* x, const float* y, int64_t n);

}  // namespace kvs

#endif  // KVSESSION_KERNELS_ACTIVATION_H_
