#include "kernels/matmul.h"

#include "kernels/dequantize.h"

namespace kvs {

size_t MatmulScratchFloats(int64_t cols) { return static_cast<size_t>(cols); }

float DotF32(const float* a, const float* b, int64_t n) {
  // Eight independent partial sums: a fixed summation order that the
  // compiler can keep in vector registers.
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (; i < n; ++i) acc[0] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void MatmulRows(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int nx,
                int64_t x_stride, float* y, int64_t y_stride, float* scratch) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* wrow;
    if (w.type == GgmlType::kF32) {
      wrow = reinterpret_cast<const float*>(w.row(r));
    } else {
      DequantizeRow(w.type, w.row(r), scratch, w.cols);
      wrow = scratch;
    }
    for (int j = 0; j < nx; ++j) y[j * y_stride + r] = DotF32(wrow, x + j * x_stride, w.cols);
  }
}

}  // namespace kvs
