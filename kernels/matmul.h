// Matrix products against GGUF weight matrices: y = x W^T for a batch of
// activation rows (GEMV when nx == 1, GEMM otherwise), in two flavours the
// caller chooses between:
//
//   exact  MatmulRows: F32 activations, weights widened to F32 exactly (the
//          scalar DequantizeRow values), F32 products and sums. Within ~1e-6
//          relative (of sum |w * x|) of the scalar reference; summation order
//          differs between instruction sets (cpu_features.h).
//   fast   QuantizeActivations once per matmul, then MatmulRowsQuantized:
//          activations rounded the way llama.cpp rounds them for the
//          weight's type, integer dot products per block (see below).
//          Matches llama.cpp's "native" numerics, not the exact path: logits
//          move by up to ~0.1.
//
// Both are BATCH-INVARIANT: the value for activation row j depends only on
// that row, the weights and the active kernels, never on nx, on the other
// rows, or on how [r0, r1) is split; a row computed alone (GEMV) is
// bit-identical to the same row inside a GEMM tile. (Forks reproduce their
// parent's logits and chunked prefill equals one prefill because of this.)
//
// Contract: pure functions of their arguments. No allocation, no threads:
// the caller splits the weight rows [r0, r1) across its threads and gives
// each its own scratch. Weights stay in their file type and are read in
// place.
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
  // Q8_0 only: the same weights in the packed layout (packed_q8_0.h), which
  // the fast path then uses. Owned by whoever packed them.
  const uint8_t* packed = nullptr;

  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
};

// ------------------------------------------------------------ exact path

// Floats of scratch MatmulRows needs for a matrix of `cols` columns.
size_t MatmulScratchFloats(int64_t cols);

// For weight rows r in [r0, r1) and activation rows j in [0, nx):
//   y[j * y_stride + r] = sum_k W[r][k] * x[j * x_stride + k].
void MatmulRows(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int nx,
                int64_t x_stride, float* y, int64_t y_stride, float* scratch);

// Dot product of two F32 vectors (scalar, fixed summation order).
float DotF32(const float* a, const float* b, int64_t n);

// ------------------------------------------------------------- fast path
//
// How activations are rounded, by weight type (each row on its own; the
// layouts are private to the kernels):
//   F32          kept in F32: the fast path equals the exact path, bit for bit.
//   F16          rounded to F16 (nearest even); products and sums in F32.
//   BF16         rounded to BF16 (nearest even); products and sums in F32
//                (AVX512-BF16 vdpbf16ps where the CPU has it: exact products,
//                denormals flushed).
//   Q8_0, Q4_0   Q8_0 blocks of 32: q = round-to-nearest-even(x * 127 /
//                max|x|) in [-127, 127], d = max|x| / 127 rounded to F16
//                (the formula of llama.cpp's x86 quantizer). Each block adds
//                (d_w * d_x) * (exact integer dot of the quants).
//   Q4_K, Q6_K   Q8_K blocks of 256: quants as above, F32 d = 1 / (127 /
//                max|x|) (llama.cpp's Q8_K), plus the sums of every 16
//                quants. Each block adds d_w * d_x * (exact integer sum over
//                sub-blocks of scale * dot) minus, for Q4_K, dmin_w * d_x *
//                (integer sum of min * quant sums).
// Tests hold every kernel to 1e-5 relative (of sum |w * x|) of a double
// evaluation of the dequantized weights against the dequantized
// activations.

// Bytes of one row of quantized activations for weights of `weight_type`
// with `cols` columns (a multiple of the weight's block size). A multiple
// of 64, and never more than ActivationBytes(GgmlType::kF32, cols), so one
// buffer of nx * ActivationBytes(kF32, widest cols) serves every matrix.
size_t ActivationBytes(GgmlType weight_type, int64_t cols);

// Quantizes rows j in [0, nx) of `cols` values at x + j * x_stride for
// weights of `weight_type`, row j to out + j * ActivationBytes(weight_type,
// cols). Once per matmul, before the threads split the weight rows; rows
// are independent, so threads may also split [0, nx) between them.
void QuantizeActivations(GgmlType weight_type, int64_t cols, const float* x, int nx,
                         int64_t x_stride, uint8_t* out);

// Columns a quantized activation row for weights of `weight_type` is cut
// at: its blocks' values (32 for Q8_0 and Q4_0, 256 for the K-quants), 1
// for F16 and BF16 rows; 0 for types the fast path does not quantize.
int64_t ActivationBlock(GgmlType weight_type);

// Columns [c0, c1) of one row of `cols` values (x: the row's first value),
// written into the quantized row at `out` exactly as QuantizeActivations
// writes them (their quants, scales and sums); the row's other bytes are
// untouched, so tasks may each quantize a slice of the same row. c0 and c1
// are multiples of ActivationBlock(weight_type) (> 0).
void QuantizeActivationColumns(GgmlType weight_type, int64_t cols, const float* x, int64_t c0, int64_t c1,
                               uint8_t* out);

// The values row `xq` (as QuantizeActivations wrote it) stands for, as F32:
// what the fast path multiplies the weights with. For tests and tools.
void DequantizeActivations(GgmlType weight_type, int64_t cols, const uint8_t* xq, float* out);

// For weight rows r in [r0, r1) and activation rows j in [0, nx) of `xq`
// (as QuantizeActivations wrote them for w.type and w.cols):
//   y[j * y_stride + r] = W[r] . xq[j].
// `ask_end` > r1: this thread computes rows [r1, ask_end) of `w` next, so
// the kernel may ask for their weights ahead (packed Q8_0: packed_q8_0.h
// MatmulPackedQ8_0). `asked`: this thread's previous call ended at r0
// with an `ask_end` past r0 (packed_q8_0.h). Neither changes a value.
void MatmulRowsQuantized(const WeightMatrix& w, int64_t r0, int64_t r1, const uint8_t* xq,
                         int nx, float* y, int64_t y_stride, int64_t ask_end = 0, bool asked = false);

// The fewest weight rows worth one MatmulRowsQuantized call with `nx`
// activation rows, for callers that split `w` between threads (a multiple
// of 16): packed Q8_0 asks its kernel (packed_q8_0.h PackedQ8_0MinCallRows),
// every other type says 16.
int64_t MatmulMinCallRows(const WeightMatrix& w, int nx);

}  // namespace kvs

#endif  // KVSESSION_KERNELS_MATMUL_H_
