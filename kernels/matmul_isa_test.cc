// The exact path and dequantization under every kernel level the CPU
// supports: agreement with the scalar reference, batch invariance (a row's
// result is bit-identical whatever else is in the call), and odd shapes.
#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/dequantize.h"
#include "kernels/isa_test_util.h"
#include "kernels/matmul.h"
#include "kernels/test_weights.h"

namespace kvs {
namespace {

struct Matrix {
  std::vector<uint8_t> data;
  WeightMatrix w;
};

Matrix RandomMatrix(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  Matrix m;
  m.data = RandomWeights(type, rows, cols, rng);
  m.w = {type, m.data.data(), rows, cols, RowBytes(type, cols)};
  return m;
}

std::vector<float> RandomActivations(int nx, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> x(nx * cols);
  for (float& v : x) v = nd(rng);
  return x;
}

// y (nx x w.rows, NaN where not written) = MatmulRows over [r0, r1).
std::vector<float> Matmul(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int nx) {
  std::vector<float> y(nx * w.rows, std::nanf(""));
  std::vector<float> scratch(MatmulScratchFloats(w.cols));
  MatmulRows(w, r0, r1, x, nx, w.cols, y.data(), w.rows, scratch.data());
  return y;
}

// sum_k |W[r][k] * x[k]|, the scale of the rounding error of a dot product.
double Magnitude(const WeightMatrix& w, int64_t r, const float* x) {
  std::vector<float> row(w.cols);
  DequantizeRow(w.type, w.row(r), row.data(), w.cols);
  double m = 0;
  for (int64_t k = 0; k < w.cols; ++k) m += std::fabs(static_cast<double>(row[k]) * x[k]);
  return m;
}

class MatmulIsaTest : public ::testing::TestWithParam<std::tuple<KernelIsa, GgmlType>> {
 protected:
  void SetUp() override {
    if (!KernelIsaSupported(isa())) GTEST_SKIP() << KernelIsaName(isa()) << " not supported here";
  }
  KernelIsa isa() const { return std::get<0>(GetParam()); }
  GgmlType type() const { return std::get<1>(GetParam()); }
};

TEST_P(MatmulIsaTest, MatchesScalarReference) {
  std::mt19937 rng(17);
  for (int64_t cols : TestColumnSizes(type())) {
    const int64_t rows = 13;
    Matrix m = RandomMatrix(type(), rows, cols, rng);
    for (int nx : {1, 2, 3, 5, 9}) {
      std::vector<float> x = RandomActivations(nx, cols, rng);
      std::vector<float> want;
      {
        ScopedKernelIsa scalar(KernelIsa::kScalar);
        want = Matmul(m.w, 0, rows, x.data(), nx);
      }
      ScopedKernelIsa active(isa());
      // Two calls over disjoint ranges (the second with r0 > 0) fill y.
      std::vector<float> got = Matmul(m.w, 0, 6, x.data(), nx);
      std::vector<float> rest = Matmul(m.w, 6, rows, x.data(), nx);
      for (int j = 0; j < nx; ++j) {
        for (int64_t r = 6; r < rows; ++r) got[j * rows + r] = rest[j * rows + r];
        for (int64_t r = 0; r < rows; ++r) {
          const double mag = Magnitude(m.w, r, x.data() + j * cols);
          ASSERT_NEAR(got[j * rows + r], want[j * rows + r], 1e-5 * mag + 1e-30)
              << "cols " << cols << " nx " << nx << " row " << r << " x " << j;
        }
      }
    }
  }
}

TEST_P(MatmulIsaTest, RowResultsDoNotDependOnTheBatch) {
  ScopedKernelIsa active(isa());
  std::mt19937 rng(23);
  for (int64_t cols : TestColumnSizes(type())) {
    const int64_t rows = 13;
    const int max_nx = 9;
    Matrix m = RandomMatrix(type(), rows, cols, rng);
    std::vector<float> x = RandomActivations(max_nx, cols, rng);
    std::vector<std::vector<float>> alone(max_nx);
    for (int j = 0; j < max_nx; ++j) alone[j] = Matmul(m.w, 0, rows, x.data() + j * cols, 1);

    auto expect_rows = [&](const std::vector<float>& y, const std::vector<int>& order, int64_t r0,
                           int64_t r1) {
      for (size_t p = 0; p < order.size(); ++p) {
        for (int64_t r = r0; r < r1; ++r) {
          ASSERT_TRUE(SameBits(y[p * rows + r], alone[order[p]][r]))
              << "cols " << cols << " batch " << order.size() << " x " << order[p] << " row " << r
              << ": " << y[p * rows + r] << " vs alone " << alone[order[p]][r];
        }
      }
    };
    for (int nx = 1; nx <= max_nx; ++nx) {
      std::vector<int> order(nx);
      for (int j = 0; j < nx; ++j) order[j] = j;
      expect_rows(Matmul(m.w, 0, rows, x.data(), nx), order, 0, rows);
      // Sub-ranges of weight rows, including ones starting at r0 > 0.
      for (auto [r0, r1] : {std::pair<int64_t, int64_t>{3, 11}, {12, 13}, {1, 6}}) {
        expect_rows(Matmul(m.w, r0, r1, x.data(), nx), order, r0, r1);
      }
    }
    // The same rows in reverse order, so each sits next to other rows.
    std::vector<float> reversed(max_nx * cols);
    std::vector<int> order(max_nx);
    for (int p = 0; p < max_nx; ++p) {
      order[p] = max_nx - 1 - p;
      std::copy_n(x.data() + order[p] * cols, cols, reversed.data() + p * cols);
    }
    expect_rows(Matmul(m.w, 0, rows, reversed.data(), max_nx), order, 0, rows);
  }
}

TEST_P(MatmulIsaTest, DequantizeRowGivesTheScalarBits) {
  std::mt19937 rng(29);
  for (int64_t cols : TestColumnSizes(type())) {
    Matrix m = RandomMatrix(type(), 2, cols, rng);
    std::vector<float> want(cols), got(cols);
    {
      ScopedKernelIsa scalar(KernelIsa::kScalar);
      DequantizeRow(type(), m.w.row(1), want.data(), cols);
    }
    ScopedKernelIsa active(isa());
    DequantizeRow(type(), m.w.row(1), got.data(), cols);
    for (int64_t k = 0; k < cols; ++k) {
      ASSERT_TRUE(SameBits(got[k], want[k])) << "cols " << cols << " k " << k;
    }
  }
}

std::string ParamName(const ::testing::TestParamInfo<std::tuple<KernelIsa, GgmlType>>& info) {
  return std::string(KernelIsaName(std::get<0>(info.param))) + "_" + TypeName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllLevelsAndTypes, MatmulIsaTest,
                         ::testing::Combine(::testing::ValuesIn(AllKernelIsas()),
                                            ::testing::ValuesIn(AllComputeTypes())),
                         ParamName);

}  // namespace
}  // namespace kvs
