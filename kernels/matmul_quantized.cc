// The fast path: activation rows rounded for the weight type
// (QuantizeActivations, scalar: it is linear in the activations, the
// matmul is not), dispatch of MatmulRowsQuantized, and its scalar
// reference.
//
// Layout of one quantized activation row (ActivationBytes, padded to 64):
//   F32 weights        float[cols]
//   F16 / BF16         uint16[cols]
//   Q4_0               int8 q[cols] | float d[cols / 32]
//   Q8_0               int8 q[cols] | float d[cols / 32] | int16 sums[cols / 16]
//   Q4_K / Q6_K        int8 q[cols] | float d[cols / 256] | int16 sums[cols / 16]
// (sums: of each 16 quants; packed Q8_0's AVX-512 kernel takes its block
// corrections from them, packed_q8_0.h)
#include <cmath>
#include <cstring>

#include "kernels/cpu_features.h"
#include "kernels/fp16.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/packed_q8_0.h"
#include "kernels/quant_blocks.h"

namespace kvs {
namespace {

using kernel_table::QuantizedRows;
using kernel_table::WeightRows;

// Values per activation scale for each ComputeType (0: no scales).
int ScaleBlock(int type) {
  switch (type) {
    case kernel_table::kQ8_0:
    case kernel_table::kQ4_0: return kQK8_0;
    case kernel_table::kQ4_K:
    case kernel_table::kQ6_K: return kQK_K;
    default: return 0;
  }
}

// Whether a quantized activation row of this ComputeType holds the sums of
// each 16 quants.
bool HasSums(int type) { return ScaleBlock(type) == kQK_K || type == kernel_table::kQ8_0; }

QuantizedRows Layout(int type, const uint8_t* data, int64_t cols) {
  QuantizedRows rows{data, 0, 0, 0};
  size_t bytes;
  switch (type) {
    case kernel_table::kF32: bytes = 4 * cols; break;
    case kernel_table::kF16:
    case kernel_table::kBF16: bytes = 2 * cols; break;
    default:
      rows.scales_offset = cols;
      rows.sums_offset = cols + 4 * (cols / ScaleBlock(type));
      bytes = rows.sums_offset;
      if (HasSums(type)) bytes += 2 * (cols / 16);
  }
  rows.row_bytes = (bytes + 63) / 64 * 64;
  return rows;
}

// int8 blocks of `block` values: scale s = max|x| / 127, multiplier
// m = 1 / s, q = nearest-even(x * m); d = s rounded to F16 (Q8_0 blocks,
// `f16_scale`) or s (Q8_K blocks); plus the sums of 16 quants when `sums`.
// (Of the roundings llama.cpp builds use, this one reproduces the
// ../shared/reference native logits most often: m = 127 / max|x| instead
// moves more quants across a rounding boundary.)
void QuantizeInt8Blocks(const float* x, int64_t cols, int block, bool f16_scale, int8_t* q,
                        float* d, int16_t* sums) {
  for (int64_t b = 0; b < cols / block; ++b, x += block, q += block) {
    float amax = 0;
    for (int i = 0; i < block; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    const float scale = amax / 127.0f;
    const float inv = scale != 0 ? 1.0f / scale : 0.0f;
    d[b] = f16_scale ? Fp16ToFp32(Fp32ToFp16(scale)) : scale;
    for (int i = 0; i < block; ++i) {
      const float v = std::nearbyint(x[i] * inv);
      q[i] = static_cast<int8_t>(std::fmax(-127.0f, std::fmin(127.0f, v)));
    }
    if (sums != nullptr) {
      for (int g = 0; g < block / 16; ++g) {
        int s = 0;
        for (int i = 0; i < 16; ++i) s += q[16 * g + i];
        sums[b * (block / 16) + g] = static_cast<int16_t>(s);
      }
    }
  }
}

void QuantizeRowForType(int type, const float* x, int64_t cols, uint8_t* out,
                        const QuantizedRows& layout) {
  switch (type) {
    case kernel_table::kF32:
      std::memcpy(out, x, cols * sizeof(float));
      return;
    case kernel_table::kF16:
      for (int64_t i = 0; i < cols; ++i) reinterpret_cast<uint16_t*>(out)[i] = Fp32ToFp16(x[i]);
      return;
    case kernel_table::kBF16:
      for (int64_t i = 0; i < cols; ++i) reinterpret_cast<uint16_t*>(out)[i] = Fp32ToBf16(x[i]);
      return;
    default: {
      const int block = ScaleBlock(type);
      kernel_table::ActiveKernelTable().quantize_int8(x, cols, block, block == kQK8_0, reinterpret_cast<int8_t*>(out),
                         reinterpret_cast<float*>(out + layout.scales_offset),
                         HasSums(type) ? reinterpret_cast<int16_t*>(out + layout.sums_offset) : nullptr);
    }
  }
}

// ---------------------------------------------------- scalar reference

// The F32 contribution of weight block b of row `w` against the matching
// activation block (quants q, scales d, 16-value sums): exact integer dot
// products per (sub-)block, combined with the block's scales.
float BlockDot(int type, const uint8_t* w, int64_t b, const int8_t* q, const float* d,
               const int16_t* sums) {
  switch (type) {
    case kernel_table::kQ8_0: {
      const BlockQ8_0& blk = reinterpret_cast<const BlockQ8_0*>(w)[b];
      int sum = 0;
      for (int i = 0; i < kQK8_0; ++i) sum += blk.qs[i] * q[b * kQK8_0 + i];
      return Fp16ToFp32(blk.d) * d[b] * static_cast<float>(sum);
    }
    case kernel_table::kQ4_0: {
      const BlockQ4_0& blk = reinterpret_cast<const BlockQ4_0*>(w)[b];
      int sum = 0;
      for (int i = 0; i < kQK4_0 / 2; ++i) {
        sum += ((blk.qs[i] & 0xF) - 8) * q[b * kQK4_0 + i];
        sum += ((blk.qs[i] >> 4) - 8) * q[b * kQK4_0 + i + 16];
      }
      return Fp16ToFp32(blk.d) * d[b] * static_cast<float>(sum);
    }
    case kernel_table::kQ4_K: {
      const BlockQ4_K& blk = reinterpret_cast<const BlockQ4_K*>(w)[b];
      const int8_t* x = q + b * kQK_K;
      int sum = 0, min_sum = 0;
      for (int sub = 0; sub < 8; ++sub) {
        uint8_t sc, m;
        Q4KScaleMin(sub, blk.scales, &sc, &m);
        int dot = 0;
        for (int i = 0; i < 32; ++i) {
          const uint8_t byte = blk.qs[32 * (sub / 2) + i];
          dot += ((sub % 2 == 0) ? (byte & 0xF) : (byte >> 4)) * x[32 * sub + i];
        }
        sum += sc * dot;
        min_sum += m * (sums[b * 16 + 2 * sub] + sums[b * 16 + 2 * sub + 1]);
      }
      return d[b] * Fp16ToFp32(blk.d) * static_cast<float>(sum) -
             d[b] * Fp16ToFp32(blk.dmin) * static_cast<float>(min_sum);
    }
    case kernel_table::kQ6_K: {
      const BlockQ6_K& blk = reinterpret_cast<const BlockQ6_K*>(w)[b];
      const int8_t* x = q + b * kQK_K;
      int sum = 0;
      for (int sub = 0; sub < 16; ++sub) {
        int dot = 0;
        for (int i = 0; i < 16; ++i) {
          const int v = 16 * sub + i, half = v / 128, g = (v % 128) / 32, l = v % 32;
          const int low = (blk.ql[64 * half + l + 32 * (g & 1)] >> (4 * (g >> 1))) & 0xF;
          const int high = (blk.qh[32 * half + l] >> (2 * g)) & 3;
          dot += ((low | (high << 4)) - 32) * x[v];
        }
        sum += blk.scales[sub] * dot;
      }
      return d[b] * Fp16ToFp32(blk.d) * static_cast<float>(sum);
    }
    default:
      return 0;
  }
}

template <int kType>
void MatmulQuantizedScalar(const WeightRows& w, int64_t r0, int64_t r1, const QuantizedRows& x,
                           int nx, float* y, int64_t y_stride) {
  const int block = ScaleBlock(kType);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* wrow = w.data + static_cast<size_t>(r) * w.row_bytes;
    for (int j = 0; j < nx; ++j) {
      const uint8_t* xrow = x.data + static_cast<size_t>(j) * x.row_bytes;
      float sum = 0;
      for (int64_t b = 0; b < w.cols / block; ++b) {
        sum += BlockDot(kType, wrow, b, reinterpret_cast<const int8_t*>(xrow),
                        reinterpret_cast<const float*>(xrow + x.scales_offset),
                        reinterpret_cast<const int16_t*>(xrow + x.sums_offset));
      }
      y[j * y_stride + r] = sum;
    }
  }
}

// Element i of a row of F32, F16 or BF16 values, widened to F32.
template <int kType>
float Widen(const uint8_t* row, int64_t i) {
  if constexpr (kType == kernel_table::kF32) {
    return reinterpret_cast<const float*>(row)[i];
  } else if constexpr (kType == kernel_table::kF16) {
    return Fp16ToFp32(reinterpret_cast<const uint16_t*>(row)[i]);
  } else {
    return Bf16ToFp32(reinterpret_cast<const uint16_t*>(row)[i]);
  }
}

// F32/F16/BF16 weights: both sides widened to F32 and summed in DotF32's
// order (so F32 weights give the exact path's bits).
template <int kType>
void MatmulFloatScalar(const WeightRows& w, int64_t r0, int64_t r1, const QuantizedRows& x, int nx,
                       float* y, int64_t y_stride) {
  const int64_t n = w.cols;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* wrow = w.data + static_cast<size_t>(r) * w.row_bytes;
    for (int j = 0; j < nx; ++j) {
      const uint8_t* xrow = x.data + static_cast<size_t>(j) * x.row_bytes;
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        for (int l = 0; l < 8; ++l) acc[l] += Widen<kType>(wrow, i + l) * Widen<kType>(xrow, i + l);
      }
      for (; i < n; ++i) acc[0] += Widen<kType>(wrow, i) * Widen<kType>(xrow, i);
      y[j * y_stride + r] =
          ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    }
  }
}

}  // namespace

namespace kernel_table {

void FillScalarMatmulQuantized(KernelTable* t) {
  t->matmul_quantized[kF32] = MatmulFloatScalar<kF32>;
  t->matmul_quantized[kF16] = MatmulFloatScalar<kF16>;
  t->matmul_quantized[kBF16] = MatmulFloatScalar<kBF16>;
  t->matmul_quantized[kQ8_0] = MatmulQuantizedScalar<kQ8_0>;
  t->matmul_quantized[kQ4_0] = MatmulQuantizedScalar<kQ4_0>;
  t->matmul_quantized[kQ4_K] = MatmulQuantizedScalar<kQ4_K>;
  t->matmul_quantized[kQ6_K] = MatmulQuantizedScalar<kQ6_K>;
  t->quantize_int8 = QuantizeInt8Blocks;
}

}  // namespace kernel_table

size_t ActivationBytes(GgmlType weight_type, int64_t cols) {
  const int type = kernel_table::ComputeTypeOf(weight_type);
  return type < 0 ? 0 : Layout(type, nullptr, cols).row_bytes;
}

void QuantizeActivations(GgmlType weight_type, int64_t cols, const float* x, int nx,
                         int64_t x_stride, uint8_t* out) {
  const int type = kernel_table::ComputeTypeOf(weight_type);
  if (type < 0) return;
  const QuantizedRows layout = Layout(type, out, cols);
  for (int j = 0; j < nx; ++j) {
    QuantizeRowForType(type, x + j * x_stride, cols, out + j * layout.row_bytes, layout);
  }
}

int64_t ActivationBlock(GgmlType weight_type) {
  const int type = kernel_table::ComputeTypeOf(weight_type);
  if (type < 0 || type == kernel_table::kF32) return 0;
  return ScaleBlock(type) == 0 ? 1 : ScaleBlock(type);
}

void QuantizeActivationColumns(GgmlType weight_type, int64_t cols, const float* x, int64_t c0, int64_t c1,
                               uint8_t* out) {
  const int type = kernel_table::ComputeTypeOf(weight_type);
  if (type < 0 || type == kernel_table::kF32) return;
  const int block = ScaleBlock(type);
  if (block == 0) {  // F16 / BF16: value by value
    uint16_t* h = reinterpret_cast<uint16_t*>(out);
    for (int64_t i = c0; i < c1; ++i) h[i] = type == kernel_table::kF16 ? Fp32ToFp16(x[i]) : Fp32ToBf16(x[i]);
    return;
  }
  const QuantizedRows layout = Layout(type, out, cols);
  kernel_table::ActiveKernelTable().quantize_int8(
      x + c0, c1 - c0, block, block == kQK8_0, reinterpret_cast<int8_t*>(out) + c0,
      reinterpret_cast<float*>(out + layout.scales_offset) + c0 / block,
      HasSums(type) ? reinterpret_cast<int16_t*>(out + layout.sums_offset) + c0 / 16 : nullptr);
}

void DequantizeActivations(GgmlType weight_type, int64_t cols, const uint8_t* xq, float* out) {
  const int type = kernel_table::ComputeTypeOf(weight_type);
  if (type < 0) return;
  const int block = ScaleBlock(type);
  if (block == 0) {
    kernel_table::DequantizeRowScalar(type, xq, out, cols);
    return;
  }
  const QuantizedRows layout = Layout(type, xq, cols);
  const int8_t* q = reinterpret_cast<const int8_t*>(xq);
  const float* d = reinterpret_cast<const float*>(xq + layout.scales_offset);
  for (int64_t i = 0; i < cols; ++i) out[i] = d[i / block] * q[i];
}

int64_t MatmulMinCallRows(const WeightMatrix& w, int nx) {
  return w.packed != nullptr && w.type == GgmlType::kQ8_0 ? PackedQ8_0MinCallRows(nx) : 16;
}

void MatmulRowsQuantized(const WeightMatrix& w, int64_t r0, int64_t r1, const uint8_t* xq,
                         int nx, float* y, int64_t y_stride, int64_t ask_end, bool asked) {
  const int type = kernel_table::ComputeTypeOf(w.type);
  if (type < 0 || r0 >= r1 || nx <= 0) return;
  if (w.packed != nullptr && type == kernel_table::kQ8_0) {
    const QuantizedRows x = Layout(type, xq, w.cols);
    MatmulPackedQ8_0(w.packed, w.rows, w.cols, r0, r1, xq, x.row_bytes, x.scales_offset, nx, y,
                     y_stride, ask_end, asked);
    return;
  }
  kernel_table::ActiveKernelTable().matmul_quantized[type](
      {w.data, w.row_bytes, w.cols}, r0, r1, Layout(type, xq, w.cols), nx, y, y_stride);
}

}  // namespace kvs
