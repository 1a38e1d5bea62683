#include "kernels/quantize.h"

#include <cmath>
#include <cstring>

#include "kernels/fp16.h"
#include "kernels/quant_blocks.h"

namespace kvs {

bool CanQuantize(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16 ||
         type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0;
}

void QuantizeRow(GgmlType type, const float* x, void* out, int64_t n) {
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(out, x, n * sizeof(float));
      return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(out)[i] = Fp32ToFp16(x[i]);
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(out)[i] = Fp32ToBf16(x[i]);
      return;
    case GgmlType::kQ8_0: {
      BlockQ8_0* b = static_cast<BlockQ8_0*>(out);
      for (int64_t i = 0; i < n / kQK8_0; ++i, x += kQK8_0) {
        float amax = 0;
        for (int j = 0; j < kQK8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = Fp32ToFp16(d);
        for (int j = 0; j < kQK8_0; ++j) b[i].qs[j] = static_cast<int8_t>(std::lround(x[j] * id));
      }
      return;
    }
    case GgmlType::kQ4_0: {
      BlockQ4_0* b = static_cast<BlockQ4_0*>(out);
      for (int64_t i = 0; i < n / kQK4_0; ++i, x += kQK4_0) {
        // The value of largest magnitude maps to -8, so its sign is kept exactly.
        float amax = 0, max = 0;
        for (int j = 0; j < kQK4_0; ++j) {
          if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
          }
        }
        const float d = max / -8.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = Fp32ToFp16(d);
        auto q = [&](float v) {
          int r = static_cast<int>(v * id + 8.5f);
          return static_cast<uint8_t>(r < 0 ? 0 : (r > 15 ? 15 : r));
        };
        for (int j = 0; j < kQK4_0 / 2; ++j) b[i].qs[j] = q(x[j]) | (q(x[j + 16]) << 4);
      }
      return;
    }
    default:
      return;
  }
}

}  // namespace kvs
