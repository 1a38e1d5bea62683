// The fast path (QuantizeActivations + MatmulRowsQuantized) under every
// kernel level the CPU supports: against a double-precision product of the
// dequantized weights and the dequantized (rounded) activations, batch
// invariance, and the activation rounding itself.
#include <algorithm>
#include <cstring>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/dequantize.h"
#include "kernels/isa_test_util.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/quantize.h"
#include "kernels/test_weights.h"

namespace kvs {
namespace {

struct Problem {
  std::vector<uint8_t> weights;
  WeightMatrix w;
  int nx;
  std::vector<float> x;
  std::vector<uint8_t> xq;  // QuantizeActivations(x)
};

Problem MakeProblem(GgmlType type, int64_t rows, int64_t cols, int nx, std::mt19937& rng) {
  Problem p;
  p.weights = RandomWeights(type, rows, cols, rng);
  p.w = {type, p.weights.data(), rows, cols, RowBytes(type, cols)};
  p.nx = nx;
  std::normal_distribution<float> nd(0, 1);
  p.x.resize(nx * cols);
  for (float& v : p.x) v = nd(rng);
  p.xq.resize(nx * ActivationBytes(type, cols));
  QuantizeActivations(type, cols, p.x.data(), nx, cols, p.xq.data());
  return p;
}

std::vector<float> MatmulFast(const Problem& p, int64_t r0, int64_t r1, const uint8_t* xq, int nx) {
  std::vector<float> y(nx * p.w.rows, std::nanf(""));
  MatmulRowsQuantized(p.w, r0, r1, xq, nx, y.data(), p.w.rows);
  return y;
}

class MatmulQuantizedTest : public ::testing::TestWithParam<std::tuple<KernelIsa, GgmlType>> {
 protected:
  void SetUp() override {
    if (!KernelIsaSupported(isa())) GTEST_SKIP() << KernelIsaName(isa()) << " not supported here";
  }
  KernelIsa isa() const { return std::get<0>(GetParam()); }
  GgmlType type() const { return std::get<1>(GetParam()); }
};

TEST_P(MatmulQuantizedTest, MatchesDoubleProductOfDequantizedOperands) {
  ScopedKernelIsa active(isa());
  std::mt19937 rng(31);
  for (int64_t cols : TestColumnSizes(type())) {
    for (int nx : {1, 2, 5, 9}) {
      const int64_t rows = 13;
      Problem p = MakeProblem(type(), rows, cols, nx, rng);
      std::vector<float> y = MatmulFast(p, 0, 6, p.xq.data(), nx);
      std::vector<float> rest = MatmulFast(p, 6, rows, p.xq.data(), nx);
      const size_t xq_bytes = ActivationBytes(type(), cols);
      std::vector<float> wrow(cols), xrow(cols);
      for (int j = 0; j < nx; ++j) {
        DequantizeActivations(type(), cols, p.xq.data() + j * xq_bytes, xrow.data());
        for (int64_t r = 0; r < rows; ++r) {
          DequantizeRow(type(), p.w.row(r), wrow.data(), cols);
          double want = 0, mag = 0;
          for (int64_t k = 0; k < cols; ++k) {
            want += static_cast<double>(wrow[k]) * xrow[k];
            mag += std::fabs(static_cast<double>(wrow[k]) * xrow[k]);
          }
          const float got = r < 6 ? y[j * rows + r] : rest[j * rows + r];
          ASSERT_NEAR(got, want, 1e-5 * mag + 1e-30)
              << "cols " << cols << " nx " << nx << " row " << r << " x " << j;
        }
      }
    }
  }
}

TEST_P(MatmulQuantizedTest, RowResultsDoNotDependOnTheBatch) {
  ScopedKernelIsa active(isa());
  std::mt19937 rng(37);
  for (int64_t cols : TestColumnSizes(type())) {
    const int64_t rows = 13;
    const int max_nx = 9;
    Problem p = MakeProblem(type(), rows, cols, max_nx, rng);
    const size_t xq_bytes = ActivationBytes(type(), cols);
    std::vector<std::vector<float>> alone(max_nx);
    for (int j = 0; j < max_nx; ++j) alone[j] = MatmulFast(p, 0, rows, p.xq.data() + j * xq_bytes, 1);
    for (int nx = 1; nx <= max_nx; ++nx) {
      for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, rows}, {3, 11}, {12, 13}}) {
        std::vector<float> y = MatmulFast(p, r0, r1, p.xq.data(), nx);
        for (int j = 0; j < nx; ++j) {
          for (int64_t r = r0; r < r1; ++r) {
            ASSERT_TRUE(SameBits(y[j * rows + r], alone[j][r]))
                << "cols " << cols << " nx " << nx << " x " << j << " row " << r;
          }
        }
      }
    }
  }
}

std::string ParamName(const ::testing::TestParamInfo<std::tuple<KernelIsa, GgmlType>>& info) {
  return std::string(KernelIsaName(std::get<0>(info.param))) + "_" + TypeName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllLevelsAndTypes, MatmulQuantizedTest,
                         ::testing::Combine(::testing::ValuesIn(AllKernelIsas()),
                                            ::testing::ValuesIn(AllComputeTypes())),
                         ParamName);

TEST(MatmulQuantizedF32Test, F32WeightsGiveTheExactPathBits) {
  for (KernelIsa isa : AllKernelIsas()) {
    ScopedKernelIsa active(isa);
    if (!active.supported()) continue;
    std::mt19937 rng(41);
    Problem p = MakeProblem(GgmlType::kF32, 13, 100, 6, rng);
    std::vector<float> fast = MatmulFast(p, 0, 13, p.xq.data(), 6);
    std::vector<float> exact(6 * 13);
    std::vector<float> scratch(MatmulScratchFloats(100));
    MatmulRows(p.w, 0, 13, p.x.data(), 6, 100, exact.data(), 13, scratch.data());
    for (size_t i = 0; i < exact.size(); ++i) {
      ASSERT_TRUE(SameBits(fast[i], exact[i])) << KernelIsaName(isa) << " " << i;
    }
  }
}

// Every activation lands within half a quantization step (plus the F16
// rounding of Q8_0's scale) of its value, and quants stay in [-127, 127].
TEST(QuantizeActivationsTest, Int8BlocksRoundToTheNearestStep) {
  std::mt19937 rng(43);
  std::normal_distribution<float> nd(0, 3);
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const int block = GgmlTraits(static_cast<uint32_t>(type)).block_elems == 32 ? 32 : 256;
    const int64_t cols = 1024;
    std::vector<float> x(cols), back(cols);
    for (float& v : x) v = nd(rng);
    x[5] = 0;
    std::fill_n(x.begin() + 256, block, 0.0f);  // an all-zero block
    std::vector<uint8_t> xq(ActivationBytes(type, cols));
    ASSERT_EQ(xq.size() % 64, 0u);
    QuantizeActivations(type, cols, x.data(), 1, cols, xq.data());
    DequantizeActivations(type, cols, xq.data(), back.data());
    for (int64_t b = 0; b < cols / block; ++b) {
      float amax = 0;
      for (int i = 0; i < block; ++i) amax = std::max(amax, std::fabs(x[b * block + i]));
      const float step = amax / 127;
      for (int i = 0; i < block; ++i) {
        const int64_t k = b * block + i;
        EXPECT_LE(std::fabs(back[k] - x[k]), 0.5f * step * 1.07f + 1e-30f)
            << TypeName(type) << " k " << k;
      }
    }
  }
}

TEST(QuantizeActivationsTest, F32RowBytesBoundEveryType) {
  for (int64_t cols : {256, 1024, 4864, 151936 / 32 * 32}) {
    for (GgmlType type : AllComputeTypes()) {
      if (cols % GgmlTraits(static_cast<uint32_t>(type)).block_elems != 0) continue;
      EXPECT_LE(ActivationBytes(type, cols), ActivationBytes(GgmlType::kF32, cols)) << TypeName(type);
      EXPECT_EQ(ActivationBytes(type, cols) % 64, 0u);
    }
  }
}

TEST(QuantizeActivationsTest, HalfTypesRoundToNearestEven) {
  const float x[4] = {1.0f, 1.0f + 1.0f / 4096, -3.14159f, 65504.0f};
  for (GgmlType type : {GgmlType::kF16, GgmlType::kBF16}) {
    std::vector<uint8_t> xq(ActivationBytes(type, 4));
    std::vector<float> back(4);
    QuantizeActivations(type, 4, x, 1, 4, xq.data());
    DequantizeActivations(type, 4, xq.data(), back.data());
    std::vector<float> want(4);
    std::vector<uint16_t> bits(4);
    QuantizeRow(type, x, bits.data(), 4);
    DequantizeRow(type, bits.data(), want.data(), 4);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(back[i], want[i]) << TypeName(type) << " " << i;
  }
}

}  // namespace
}  // namespace kvs

namespace kvs {
namespace {

TEST(QuantizeActivationsTest, EveryLevelGivesTheScalarBits) {
  std::mt19937 rng(41);
  std::normal_distribution<float> nd(0, 3);
  const int64_t cols = 1024;
  const int nx = 3;
  std::vector<float> x(nx * cols);
  for (float& v : x) v = nd(rng);
  x[5] = 0.5f * 127 / 3;  // values on rounding ties too
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K}) {
    const size_t bytes = nx * ActivationBytes(type, cols);
    std::vector<uint8_t> want(bytes), got(bytes);
    {
      ScopedKernelIsa scalar(KernelIsa::kScalar);
      QuantizeActivations(type, cols, x.data(), nx, cols, want.data());
    }
    for (KernelIsa isa : AllKernelIsas()) {
      if (!KernelIsaSupported(isa)) continue;
      ScopedKernelIsa active(isa);
      std::fill(got.begin(), got.end(), 0xAB);
      QuantizeActivations(type, cols, x.data(), nx, cols, got.data());
      // Compare the meaningful bytes (quants, scales, sums), not padding.
      for (int j = 0; j < nx; ++j) {
        const size_t row = ActivationBytes(type, cols);
        const size_t used = cols + 4 * (cols / (type == GgmlType::kQ8_0 ? 32 : 256)) +
                            (type == GgmlType::kQ4_K ? 2 * (cols / 16) : 0);
        for (size_t b = 0; b < used; ++b) {
          ASSERT_EQ(got[j * row + b], want[j * row + b]) << TypeName(type) << " " << KernelIsaName(isa);
        }
      }
    }
  }
}


// A row quantized in slices (one per attention task's heads) is the row
// QuantizeActivations writes: every slice's quants, scales and sums land
// where the whole row's do, and nothing else is touched.
TEST(QuantizeActivationsTest, ColumnSlicesMakeTheWholeRowsBytes) {
  std::mt19937 rng(47);
  std::normal_distribution<float> nd(0, 3);
  const int64_t cols = 2048;
  std::vector<float> x(cols);
  for (float& v : x) v = nd(rng);
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kF16,
                        GgmlType::kBF16}) {
    const int64_t block = ActivationBlock(type);
    ASSERT_GT(block, 0) << TypeName(type);
    ASSERT_EQ(256 % block, 0) << TypeName(type);
    std::vector<uint8_t> want(ActivationBytes(type, cols), 0xCD), got(want.size(), 0xCD);
    QuantizeActivations(type, cols, x.data(), 1, cols, want.data());
    // Slices of 256 columns (a KV head's two query heads of 128) in a
    // scrambled order.
    for (int64_t c0 : {1792, 0, 512, 256, 1536, 768, 1280, 1024}) {
      QuantizeActivationColumns(type, cols, x.data(), c0, c0 + 256, got.data());
    }
    // The padding was left as it was in both.
    EXPECT_EQ(got, want) << TypeName(type);
  }
  EXPECT_EQ(ActivationBlock(GgmlType::kF32), 0);
  EXPECT_EQ(ActivationBlock(GgmlType::kQ8_0), 32);
  EXPECT_EQ(ActivationBlock(GgmlType::kQ4_K), 256);
  EXPECT_EQ(ActivationBlock(GgmlType::kF16), 1);
}


// The kernel table's int8 rounding at every level against the scalar
// level, byte for byte: rows of 16-block runs and a tail (the AVX-512
// level takes 16 blocks of 32 at a time), with and without the sums of
// each 16 quants, F16 and F32 scales, zero blocks,
// blocks of one nonzero value, values on rounding ties, and wide ranges.
TEST(QuantizeInt8Test, EveryLevelGivesTheScalarLevelsBytesForRunsOfBlocksAndTails) {
  std::mt19937 rng(53);
  std::normal_distribution<float> nd(0, 1);
  std::uniform_int_distribution<int> exponent(-20, 20);
  for (int64_t cols : {int64_t{32}, int64_t{128}, int64_t{256 + 32}, int64_t{512}, int64_t{1024 + 96}, int64_t{3072}}) {
    std::vector<float> x(cols);
    for (int64_t i = 0; i < cols; ++i) x[i] = std::ldexp(nd(rng), exponent(rng) / 4 * (i / 32 % 3));
    if (cols >= 96) {
      std::fill_n(x.begin() + 32, 32, 0.0f);  // a zero block
      std::fill_n(x.begin() + 64, 32, 0.0f);
      x[70] = -2.5f;  // a block of one value
      x[1] = 127.0f;  // ties: with max|x| 127 the multiplier is 1
      x[2] = 0.5f;
      x[3] = -1.5f;
      x[4] = 2.5f;
    }
    for (bool f16_scale : {true, false}) {
      std::vector<int8_t> want_q(cols);
      std::vector<float> want_d(cols / 32);
      std::vector<int16_t> want_sums(cols / 16);
      kernel_table::KernelTableFor(KernelIsa::kScalar)
          .quantize_int8(x.data(), cols, 32, f16_scale, want_q.data(), want_d.data(), want_sums.data());
      for (KernelIsa isa : AllKernelIsas()) {
        if (!KernelIsaSupported(isa)) continue;
        for (bool with_sums : {false, true}) {
          std::vector<int8_t> q(cols, 99);
          std::vector<float> d(cols / 32, -1.0f);
          std::vector<int16_t> sums(cols / 16, -7);
          kernel_table::KernelTableFor(isa).quantize_int8(x.data(), cols, 32, f16_scale, q.data(), d.data(),
                                                          with_sums ? sums.data() : nullptr);
          EXPECT_EQ(q, want_q) << KernelIsaName(isa) << " cols " << cols << " f16 " << f16_scale;
          EXPECT_EQ(sums, with_sums ? want_sums : std::vector<int16_t>(cols / 16, -7)) << KernelIsaName(isa);
          for (size_t b = 0; b < d.size(); ++b) {
            EXPECT_EQ(std::memcmp(&d[b], &want_d[b], sizeof(float)), 0)
                << KernelIsaName(isa) << " cols " << cols << " block " << b;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvs
