#include "kernels/dequantize.h"

#include <cstring>

#include "kernels/fp16.h"
#include "kernels/kernel_table.h"
#include "kernels/quant_blocks.h"

namespace kvs {
namespace {

void DequantizeQ8_0(const BlockQ8_0* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    for (int j = 0; j < kQK8_0; ++j) y[i * kQK8_0 + j] = d * b[i].qs[j];
  }
}

void DequantizeQ4_0(const BlockQ4_0* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK4_0; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[i * kQK4_0 + j] = d * ((b[i].qs[j] & 0xF) - 8);
      y[i * kQK4_0 + j + 16] = d * ((b[i].qs[j] >> 4) - 8);
    }
  }
}

void DequantizeQ4_K(const BlockQ4_K* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    const float dmin = Fp16ToFp32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int g = 0; g < 4; ++g) {  // 4 groups of 64: two sub-blocks each
      uint8_t sc, m;
      Q4KScaleMin(2 * g, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      Q4KScaleMin(2 * g + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) y[l] = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) y[32 + l] = d2 * (q[l] >> 4) - m2;
      y += 64;
      q += 32;
    }
  }
}

void DequantizeQ6_K(const BlockQ6_K* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int half = 0; half < 2; ++half) {  // 2 halves of 128
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

}  // namespace

bool IsComputeType(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

namespace kernel_table {

void DequantizeRowScalar(int type, const uint8_t* row, float* out, int64_t n) {
  switch (type) {
    case kF32:
      std::memcpy(out, row, n * sizeof(float));
      return;
    case kF16: {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < n; ++i) out[i] = Fp16ToFp32(h[i]);
      return;
    }
    case kBF16: {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFp32(h[i]);
      return;
    }
    case kQ8_0:
      return DequantizeQ8_0(reinterpret_cast<const BlockQ8_0*>(row), out, n);
    case kQ4_0:
      return DequantizeQ4_0(reinterpret_cast<const BlockQ4_0*>(row), out, n);
    case kQ4_K:
      return DequantizeQ4_K(reinterpret_cast<const BlockQ4_K*>(row), out, n);
    case kQ6_K:
      return DequantizeQ6_K(reinterpret_cast<const BlockQ6_K*>(row), out, n);
    default:
      return;
  }
}

namespace {

template <int kType>
void DequantizeScalar(const uint8_t* row, float* out, int64_t n) {
  DequantizeRowScalar(kType, row, out, n);
}

}  // namespace

void FillScalarDequantize(KernelTable* t) {
  t->dequantize[kF32] = DequantizeScalar<kF32>;
  t->dequantize[kF16] = DequantizeScalar<kF16>;
  t->dequantize[kBF16] = DequantizeScalar<kBF16>;
  t->dequantize[kQ8_0] = DequantizeScalar<kQ8_0>;
  t->dequantize[kQ4_0] = DequantizeScalar<kQ4_0>;
  t->dequantize[kQ4_K] = DequantizeScalar<kQ4_K>;
  t->dequantize[kQ6_K] = DequantizeScalar<kQ6_K>;
}

}  // namespace kernel_table

void DequantizeRow(GgmlType type, const void* row, float* out, int64_t n) {
  const int t = kernel_table::ComputeTypeOf(type);
  if (t < 0) return;
  kernel_table::ActiveKernelTable().dequantize[t](static_cast<const uint8_t*>(row), out, n);
}

}  // namespace kvs
