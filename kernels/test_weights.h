// Test helper: random weight rows in every compute type, built directly in
// their block layout (random quants, random but sane scales).
#ifndef KVSESSION_KERNELS_TEST_WEIGHTS_H_
#define KVSESSION_KERNELS_TEST_WEIGHTS_H_

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/fp16.h"
#include "kernels/ggml_types.h"
#include "kernels/quant_blocks.h"

namespace kvs {

// `rows` rows of `cols` random weights of `type`, rows packed back to back.
inline std::vector<uint8_t> RandomWeights(GgmlType type, int64_t rows, int64_t cols,
                                          std::mt19937& rng) {
  GgmlTypeTraits t = GgmlTraits(static_cast<uint32_t>(type));
  const size_t row_bytes = cols / t.block_elems * t.block_bytes;
  std::vector<uint8_t> w(rows * row_bytes);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const int64_t n_blocks = rows * (cols / t.block_elems);
  auto scale = [&](float magnitude) { return Fp32ToFp16(magnitude * (0.5f + 0.5f * (uni(rng) + 1))); };
  for (int64_t i = 0; i < n_blocks; ++i) {
    uint8_t* blk = w.data() + i * t.block_bytes;
    switch (type) {
      case GgmlType::kF32: {
        float v = uni(rng);
        std::memcpy(blk, &v, 4);
        break;
      }
      case GgmlType::kF16: {
        uint16_t v = Fp32ToFp16(uni(rng));
        std::memcpy(blk, &v, 2);
        break;
      }
      case GgmlType::kBF16: {
        uint16_t v = Fp32ToBf16(uni(rng));
        std::memcpy(blk, &v, 2);
        break;
      }
      case GgmlType::kQ8_0: reinterpret_cast<BlockQ8_0*>(blk)->d = scale(0.01f); break;
      case GgmlType::kQ4_0: reinterpret_cast<BlockQ4_0*>(blk)->d = scale(0.1f); break;
      case GgmlType::kQ4_K: {
        auto* q = reinterpret_cast<BlockQ4_K*>(blk);
        q->d = scale(0.01f);
        q->dmin = scale(0.01f);
        break;
      }
      case GgmlType::kQ6_K: reinterpret_cast<BlockQ6_K*>(blk)->d = scale(0.001f); break;
      default: break;
    }
  }
  return w;
}

}  // namespace kvs

#endif  // KVSESSION_KERNELS_TEST_WEIGHTS_H_
