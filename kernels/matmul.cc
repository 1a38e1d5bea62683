// MatmulRows: dispatch through the kernel table, and the scalar reference
// of the exact path (the ground truth the SIMD kernels are tested against).
#include "kernels/matmul.h"

#include "kernels/dequantize.h"
#include "kernels/kernel_table.h"

namespace kvs {
namespace {

using kernel_table::WeightRows;

// Dequantize each weight row once (F32 rows are read in place), then one
// DotF32 per activation row.
template <int kType>
void MatmulRowsScalar(const WeightRows& w, int64_t r0, int64_t r1, const float* x, int nx,
                      int64_t x_stride, float* y, int64_t y_stride, float* scratch) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.data + static_cast<size_t>(r) * w.row_bytes;
    const float* wrow = scratch;
    if constexpr (kType == kernel_table::kF32) {
      wrow = reinterpret_cast<const float*>(row);
    } else {
      kernel_table::DequantizeRowScalar(kType, row, scratch, w.cols);
    }
    for (int j = 0; j < nx; ++j) y[j * y_stride + r] = DotF32(wrow, x + j * x_stride, w.cols);
  }
}

}  // namespace

namespace kernel_table {

void FillScalarMatmul(KernelTable* t) {
  t->matmul[kF32] = MatmulRowsScalar<kF32>;
  t->matmul[kF16] = MatmulRowsScalar<kF16>;
  t->matmul[kBF16] = MatmulRowsScalar<kBF16>;
  t->matmul[kQ8_0] = MatmulRowsScalar<kQ8_0>;
  t->matmul[kQ4_0] = MatmulRowsScalar<kQ4_0>;
  t->matmul[kQ4_K] = MatmulRowsScalar<kQ4_K>;
  t->matmul[kQ6_K] = MatmulRowsScalar<kQ6_K>;
}

}  // namespace kernel_table

size_t MatmulScratchFloats(int64_t cols) {
  return static_cast<size_t>(kernel_table::kMatmulScratchRows) * static_cast<size_t>(cols);
}

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
  const int type = kernel_table::ComputeTypeOf(w.type);
  if (type < 0 || r0 >= r1 || nx <= 0) return;
  kernel_table::ActiveKernelTable().matmul[type]({w.data, w.row_bytes, w.cols}, r0, r1, x, nx,
                                                 x_stride, y, y_stride, scratch);
}

}  // namespace kvs
