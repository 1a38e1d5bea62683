// Matrix products against GGUF weight matrices: y = x W^T for a batch of
// activation rows (GEMV when nx == 1, GEMM otherwise).
//
// Contract: pure function of its arguments. No allocation, no threads: the
// caller splits the weight rows [r0, r1) across its threads and gives each
// its own scratch. Activations and outputs are F32; weights stay in their
// file type and are read in place (the "exact" path: products in F32, the
// same arithmetic llama.cpp uses on F32-widened weights).
#ifndef KVSESSION_KERNELS_MATMUL_H_
#define KVSESSION_KERNELS_MATMUL_H_

#include <cstddef>
#include <cstdint>

#include "kernels/ggml_types.h"

namespace kvs {

// `rows` rows of `cols` values of `type`, each row `row_bytes` long.
struct WeightMatrix {
  GgmlType type = GgmlType::kF32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;

  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
};

// Floats of scratch MatmulRows needs for a matrix of `cols` columns.
size_t MatmulScratchFloats(int64_t cols);

// For weight rows r in [r0, r1) and activation rows j in [0, nx):
//   y[j * y_stride + r] = sum_k W[r][k] * x[j * x_stride + k].
void MatmulRows(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int nx,
                int64_t x_stride, float* y, int64_t y_stride, float* scratch);

// Dot product of two F32 vectors.
float DotF32(const float* a, const float* b, int64_t n);

}  // namespace kvs

#endif  // KVSESSION_KERNELS_MATMUL_H_
