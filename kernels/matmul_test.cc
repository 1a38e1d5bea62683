#include "kernels/matmul.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/dequantize.h"
#include "kernels/test_weights.h"

namespace kvs {
namespace {

class MatmulTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(MatmulTest, MatchesDoublePrecisionDotOfDequantizedRows) {
  const GgmlType type = GetParam();
  const int64_t rows = 37, cols = 512;
  std::mt19937 rng(42);
  std::vector<uint8_t> data = RandomWeights(type, rows, cols, rng);
  GgmlTypeTraits t = GgmlTraits(static_cast<uint32_t>(type));
  WeightMatrix w{type, data.data(), rows, cols, static_cast<size_t>(cols / t.block_elems * t.block_bytes)};

  for (int nx : {1, 3, 8}) {
    std::uniform_real_distribution<float> uni(-1, 1);
    std::vector<float> x(nx * cols);
    for (float& v : x) v = uni(rng);
    std::vector<float> y(nx * rows, -12345.0f);
    std::vector<float> scratch(MatmulScratchFloats(cols));
    // Two calls over disjoint row ranges must fill the whole output.
    MatmulRows(w, 0, 20, x.data(), nx, cols, y.data(), rows, scratch.data());
    MatmulRows(w, 20, rows, x.data(), nx, cols, y.data(), rows, scratch.data());

    std::vector<float> wrow(cols);
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(type, w.row(r), wrow.data(), cols);
      for (int j = 0; j < nx; ++j) {
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < cols; ++k) {
          ref += static_cast<double>(wrow[k]) * x[j * cols + k];
          mag += std::fabs(static_cast<double>(wrow[k]) * x[j * cols + k]);
        }
        EXPECT_NEAR(y[j * rows + r], ref, 1e-5 * mag + 1e-30)
            << GgmlTypeName(static_cast<uint32_t>(type)) << " row " << r << " x " << j;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllComputeTypes, MatmulTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16,
                                           GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K,
                                           GgmlType::kQ6_K),
                         [](const auto& info) {
                           return GgmlTypeName(static_cast<uint32_t>(info.param));
                         });

}  // namespace
}  // namespace kvs
