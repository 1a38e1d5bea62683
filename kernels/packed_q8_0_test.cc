// Packed Q8_0: the layout, and one arithmetic for every kernel: the scalar
// reference, AVX2, AVX-512 VNNI and AMX give the same bits for any batch
// size and row range, within 1e-5 of a double-precision product. Dispatch
// goes through the kernel table: the scalar level runs the scalar
// reference, AVX2 and AVX-512 pack, the AVX-512 level's name says whether
// it uses AMX, and the environment
// overrides (KVS_KERNELS, KVS_AMX) are checked by the kernels_env_overrides
// test, which runs KernelEnvOverrideTest in a process started with them.
#include "kernels/packed_q8_0.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu_features.h"
#include "kernels/dequantize.h"
#include "kernels/fp16.h"
#include "kernels/isa_test_util.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/quant_blocks.h"
#include "kernels/test_weights.h"

namespace kvs {
namespace {

struct Packed {
  std::vector<uint8_t> rows;
  std::vector<uint8_t> packed;
  int64_t n_rows, cols;
};

Packed MakePacked(int64_t rows, int64_t cols, std::mt19937& rng) {
  Packed p{RandomWeights(GgmlType::kQ8_0, rows, cols, rng), {}, rows, cols};
  p.packed.resize(PackedQ8_0Bytes(rows, cols) + 64);
  PackQ8_0(p.rows.data(), RowBytes(GgmlType::kQ8_0, cols), rows, cols, p.packed.data());
  return p;
}

TEST(PackedQ8_0Test, LayoutHoldsQuantsPlus128InVnniOrderAndF16Scales) {
  std::mt19937 rng(1);
  Packed p = MakePacked(20, 64, rng);  // two groups, the second with 4 real rows
  const size_t row_bytes = RowBytes(GgmlType::kQ8_0, 64);
  const size_t scales_bytes = 64;  // 2 blocks x 16 x F16
  for (int64_t r : {0, 7, 15, 16, 19}) {
    const BlockQ8_0* blk = reinterpret_cast<const BlockQ8_0*>(p.rows.data() + r * row_bytes);
    const uint8_t* group = p.packed.data() + (r / 16) * PackedQ8_0GroupBytes(64);
    const int n = static_cast<int>(r % 16);
    for (int b = 0; b < 2; ++b) {
      uint16_t scale;
      std::memcpy(&scale, group + 2 * (16 * b + n), 2);
      EXPECT_EQ(scale, blk[b].d);
      for (int k = 0; k < 32; ++k) {
        EXPECT_EQ(group[scales_bytes + b * 512 + (k / 4) * 64 + n * 4 + k % 4], blk[b].qs[k] + 128);
      }
    }
  }
  // Padding rows of the last group are zero weights.
  const uint8_t* last = p.packed.data() + PackedQ8_0GroupBytes(64);
  EXPECT_EQ(last[scales_bytes + 0 * 64 + 5 * 4 + 0], 128);
}

// Runs for each level that packs (AVX2, AVX-512), where the CPU has it.
class PackedQ8_0KernelTest : public KernelIsaTest {};

INSTANTIATE_TEST_SUITE_P(PackingLevels, PackedQ8_0KernelTest, ::testing::Values(KernelIsa::kAvx2, KernelIsa::kAvx512),
                         [](const ::testing::TestParamInfo<KernelIsa>& info) {
                           return std::string(KernelIsaName(info.param));
                         });

TEST_P(PackedQ8_0KernelTest, EveryKernelGivesTheSameBitsAndTheRightValues) {
  std::mt19937 rng(5);
  ScopedKernelIsa level(GetParam());
  for (int64_t cols : {32, 640, 1024, 3072, 32800}) {  // 640: 20 blocks, 16 and a rest
    const int64_t rows = 45;
    Packed p = MakePacked(rows, cols, rng);
    for (int nx : {1, 3, 5, 7, 8, 12, 16, 21, 40}) {  // 5 to 16: one-pass tiles of up to 8
      std::normal_distribution<float> nd(0, 1);
      std::vector<float> x(nx * cols);
      for (float& v : x) v = nd(rng);
      const size_t xb = ActivationBytes(GgmlType::kQ8_0, cols);
      std::vector<uint8_t> xq(nx * xb);
      QuantizeActivations(GgmlType::kQ8_0, cols, x.data(), nx, cols, xq.data());
      const size_t scales_offset = cols;

      std::vector<float> ref(nx * rows), fast(nx * rows, std::nanf("")), alone(nx * rows), whole(nx * rows);
      MatmulPackedQ8_0Scalar(p.packed.data(), rows, cols, 0, rows, xq.data(), xb, scales_offset, nx,
                             ref.data(), rows);
      // Split ranges that cut groups, each told the next follows (ask_end,
      // past the matrix's end for the last) and, after the first, that the
      // one before asked for it (asked), and the dispatching entry
      // point (AMX for nx >= 16 where available). The AVX-512 kernel takes
      // two groups a tile while two are left: [3, 29) is such a pair cut at
      // both ends, [29, 37) a pair cut at its start, [37, 45) a lone group
      // cut at its start, and the whole range a pair and a lone group.
      MatmulPackedQ8_0(p.packed.data(), rows, cols, 0, 3, xq.data(), xb, scales_offset, nx, fast.data(), rows, 29);
      for (int j = 0; j < nx; ++j) {  // ask_end asks; it writes nothing past r1
        for (int64_t r = 3; r < rows; ++r) ASSERT_TRUE(std::isnan(fast[j * rows + r])) << "row " << r;
      }
      MatmulPackedQ8_0(p.packed.data(), rows, cols, 3, 29, xq.data(), xb, scales_offset, nx, fast.data(), rows, 37,
                       /*asked=*/true);
      for (int j = 0; j < nx; ++j) {  // a pair writes nothing past r1 either
        for (int64_t r = 29; r < rows; ++r) ASSERT_TRUE(std::isnan(fast[j * rows + r])) << "row " << r;
      }
      MatmulPackedQ8_0(p.packed.data(), rows, cols, 29, 37, xq.data(), xb, scales_offset, nx, fast.data(), rows, rows,
                       /*asked=*/true);
      MatmulPackedQ8_0(p.packed.data(), rows, cols, 37, rows, xq.data(), xb, scales_offset, nx, fast.data(), rows,
                       rows + 100, /*asked=*/true);
      MatmulPackedQ8_0(p.packed.data(), rows, cols, 0, rows, xq.data(), xb, scales_offset, nx, whole.data(), rows, 0);
      for (int j = 0; j < nx; ++j) {  // every row alone (GEMV)
        MatmulPackedQ8_0(p.packed.data(), rows, cols, 0, rows, xq.data() + j * xb, xb, scales_offset, 1,
                         alone.data() + j * rows, 0);
      }
      std::vector<float> wrow(cols), xrow(cols);
      for (int j = 0; j < nx; ++j) {
        DequantizeActivations(GgmlType::kQ8_0, cols, xq.data() + j * xb, xrow.data());
        for (int64_t r = 0; r < rows; ++r) {
          const size_t i = j * rows + r;
          ASSERT_TRUE(SameBits(fast[i], ref[i])) << "cols " << cols << " nx " << nx << " row " << r << " x " << j;
          ASSERT_TRUE(SameBits(alone[i], ref[i])) << "cols " << cols << " nx " << nx;
          ASSERT_TRUE(SameBits(whole[i], ref[i])) << "cols " << cols << " nx " << nx << " row " << r << " x " << j;
          DequantizeRow(GgmlType::kQ8_0, p.rows.data() + r * RowBytes(GgmlType::kQ8_0, cols), wrow.data(), cols);
          double want = 0, mag = 0;
          for (int64_t k = 0; k < cols; ++k) {
            want += static_cast<double>(wrow[k]) * xrow[k];
            mag += std::fabs(static_cast<double>(wrow[k]) * xrow[k]);
          }
          ASSERT_NEAR(ref[i], want, 1e-5 * mag + 1e-30);
        }
      }
    }
  }
  RecordProperty("amx", AmxAvailable() ? "yes" : "no");
}

// The AMX kernel's shapes (packed_q8_0_amx.cc): one or two activation
// tiles multiply the packed weights, three or more a signed copy made a
// pass of groups at a time (3,072 columns: four groups a pass, so 100 rows
// take two); batches of 16 to 31 rows, a partial last tile, and ranges
// that start and end inside groups, inside a pass or across passes.
TEST(PackedQ8_0AmxTest, EveryBatchSizeAndRowRangeGivesTheScalarBits) {
  ScopedKernelIsa level(KernelIsa::kAvx512);
  if (!level.supported() || !kernel_table::ActiveKernelTable().amx) GTEST_SKIP() << "no AMX here";
  std::mt19937 rng(13);
  const int64_t rows = 100;
  for (int64_t cols : {1024, 3072}) {
    Packed p = MakePacked(rows, cols, rng);
    const size_t xb = ActivationBytes(GgmlType::kQ8_0, cols);
    for (int nx : {16, 17, 31, 32, 33, 48, 64, 70}) {
      std::normal_distribution<float> nd(0, 1);
      std::vector<float> x(nx * cols);
      for (float& v : x) v = nd(rng);
      std::vector<uint8_t> xq(nx * xb);
      QuantizeActivations(GgmlType::kQ8_0, cols, x.data(), nx, cols, xq.data());
      std::vector<float> ref(nx * rows);
      MatmulPackedQ8_0Scalar(p.packed.data(), rows, cols, 0, rows, xq.data(), xb, cols, nx, ref.data(), rows);
      for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, rows}, {5, 83}, {16, 48}, {17, 18}, {64, rows}}) {
        std::vector<float> got(nx * rows, std::nanf(""));
        MatmulPackedQ8_0(p.packed.data(), rows, cols, r0, r1, xq.data(), xb, cols, nx, got.data(), rows);
        for (int j = 0; j < nx; ++j) {
          for (int64_t r = 0; r < rows; ++r) {
            const size_t i = j * rows + r;
            if (r < r0 || r >= r1) {
              ASSERT_TRUE(std::isnan(got[i])) << "wrote row " << r << " outside [" << r0 << ", " << r1 << ")";
            } else {
              ASSERT_TRUE(SameBits(got[i], ref[i]))
                  << "cols " << cols << " nx " << nx << " range [" << r0 << ", " << r1 << ") row " << r << " x " << j;
            }
          }
        }
      }
    }
  }
}

// Quants at the ends of their ranges (weights -128 and 127, activations
// -127 and 127, all the same sign in a pair) are where a saturating int16
// step would show: the sums must be the exact integers.
TEST_P(PackedQ8_0KernelTest, ExtremeQuantsGiveTheExactSums) {
  ScopedKernelIsa level(GetParam());
  const int64_t rows = 16, cols = 64;
  const size_t row_bytes = RowBytes(GgmlType::kQ8_0, cols);
  std::vector<uint8_t> w(rows * row_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    BlockQ8_0* blk = reinterpret_cast<BlockQ8_0*>(w.data() + r * row_bytes);
    for (int b = 0; b < 2; ++b) {
      blk[b].d = Fp32ToFp16(1.0f);
      for (int k = 0; k < 32; ++k) blk[b].qs[k] = static_cast<int8_t>(r % 2 == 0 ? -128 : (k % 3 == 0 ? -128 : 127));
    }
  }
  std::vector<uint8_t> packed(PackedQ8_0Bytes(rows, cols) + 64);
  PackQ8_0(w.data(), row_bytes, rows, cols, packed.data());
  // Activation rows: all -127, all 127, alternating.
  const int nx = 3;
  const size_t xb = ActivationBytes(GgmlType::kQ8_0, cols);
  std::vector<uint8_t> xq(nx * xb);
  for (int j = 0; j < nx; ++j) {
    int8_t* q = reinterpret_cast<int8_t*>(xq.data() + j * xb);
    float* d = reinterpret_cast<float*>(xq.data() + j * xb + cols);
    for (int k = 0; k < cols; ++k) q[k] = static_cast<int8_t>(j == 0 ? -127 : j == 1 ? 127 : (k % 2 ? 127 : -127));
    d[0] = d[1] = 1.0f;
    int16_t* sums = reinterpret_cast<int16_t*>(d + cols / 32);  // each 16 quants' (the rows' layout)
    for (int k = 0; k < cols; ++k) sums[k / 16] = static_cast<int16_t>((k % 16 ? sums[k / 16] : 0) + q[k]);
  }
  std::vector<float> y(nx * rows), ref(nx * rows);
  MatmulPackedQ8_0(packed.data(), rows, cols, 0, rows, xq.data(), xb, cols, nx, y.data(), rows);
  MatmulPackedQ8_0Scalar(packed.data(), rows, cols, 0, rows, xq.data(), xb, cols, nx, ref.data(), rows);
  for (int j = 0; j < nx; ++j) {
    const int8_t* q = reinterpret_cast<const int8_t*>(xq.data() + j * xb);
    for (int64_t r = 0; r < rows; ++r) {
      const BlockQ8_0* blk = reinterpret_cast<const BlockQ8_0*>(w.data() + r * row_bytes);
      int64_t want = 0;
      for (int k = 0; k < cols; ++k) want += int64_t{blk[k / 32].qs[k % 32]} * q[k];
      EXPECT_EQ(y[j * rows + r], static_cast<float>(want)) << "row " << r << " x " << j;
      EXPECT_TRUE(SameBits(y[j * rows + r], ref[j * rows + r]));
    }
  }
}

TEST_P(PackedQ8_0KernelTest, MatmulRowsQuantizedUsesThePackedWeights) {
  std::mt19937 rng(9);
  ScopedKernelIsa level(GetParam());
  const int64_t rows = 32, cols = 256;
  Packed p = MakePacked(rows, cols, rng);
  WeightMatrix w{GgmlType::kQ8_0, p.rows.data(), rows, cols, RowBytes(GgmlType::kQ8_0, cols)};
  std::vector<float> x(cols);
  for (int k = 0; k < cols; ++k) x[k] = std::sin(0.1f * k);
  std::vector<uint8_t> xq(ActivationBytes(GgmlType::kQ8_0, cols));
  QuantizeActivations(GgmlType::kQ8_0, cols, x.data(), 1, cols, xq.data());
  std::vector<float> plain(rows), packed(rows), ref(rows);
  MatmulRowsQuantized(w, 0, rows, xq.data(), 1, plain.data(), 0);
  w.packed = p.packed.data();
  MatmulRowsQuantized(w, 0, rows, xq.data(), 1, packed.data(), 0);
  MatmulPackedQ8_0Scalar(p.packed.data(), rows, cols, 0, rows, xq.data(), xq.size(), cols, 1, ref.data(), 0);
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_TRUE(SameBits(packed[r], ref[r]));
    EXPECT_NEAR(packed[r], plain[r], 1e-4f);
  }
}

// PackQ8_0Group (the per-call packer of a Q8_0 KV cache's keys) gives the
// bytes PackQ8_0 gives the same rows, on every level, for rows anywhere
// in memory (here in reverse order, at odd addresses) and partial groups.
TEST(PackedQ8_0Test, PackQ8_0GroupGivesPackQ8_0sBytesOnEveryLevel) {
  for (KernelIsa isa : AllKernelIsas()) {
    if (!KernelIsaSupported(isa)) continue;
    ScopedKernelIsa active(isa);
    for (int64_t cols : {32, 128, 256, 1024}) {
      for (int n_rows : {1, 5, 8, 9, 16}) {
        std::mt19937 rng(static_cast<unsigned>(cols + n_rows));
        const size_t row_bytes = RowBytes(GgmlType::kQ8_0, cols);
        const std::vector<uint8_t> rows = RandomWeights(GgmlType::kQ8_0, n_rows, cols, rng);
        // Row n of the group is stored at slot n_rows - 1 - n, one byte off alignment.
        std::vector<uint8_t> scattered(n_rows * row_bytes + 1);
        const uint8_t* ptrs[16];
        for (int n = 0; n < n_rows; ++n) {
          uint8_t* at = scattered.data() + 1 + (n_rows - 1 - n) * row_bytes;
          std::memcpy(at, rows.data() + n * row_bytes, row_bytes);
          ptrs[n] = at;
        }
        const size_t bytes = PackedQ8_0GroupBytes(cols);
        std::vector<uint8_t> want(bytes + 64), got(bytes + 64, 0xAB);
        uint8_t* want_at = want.data() + (64 - reinterpret_cast<uintptr_t>(want.data()) % 64) % 64;
        uint8_t* got_at = got.data() + (64 - reinterpret_cast<uintptr_t>(got.data()) % 64) % 64;
        PackQ8_0(rows.data(), row_bytes, n_rows, cols, want_at);
        PackQ8_0Group(ptrs, n_rows, cols, got_at);
        ASSERT_EQ(0, std::memcmp(want_at, got_at, bytes))
            << KernelIsaName(isa) << " cols " << cols << " rows " << n_rows;
      }
    }
  }
}

TEST(PackedQ8_0DispatchTest, TheScalarLevelNeitherPacksNorRunsASimdPackedKernel) {
  ScopedKernelIsa level(KernelIsa::kScalar);
  const kernel_table::KernelTable& t = kernel_table::ActiveKernelTable();
  EXPECT_FALSE(PackedQ8_0Supported());
  EXPECT_EQ(t.packed_q8_0, &MatmulPackedQ8_0Scalar);
  EXPECT_EQ(t.packed_q8_0_wide, &MatmulPackedQ8_0Scalar);
  EXPECT_FALSE(t.amx);
  EXPECT_EQ(std::string(ActiveKernelsName()), "scalar");
}

TEST(PackedQ8_0DispatchTest, TheAvx2LevelPacksWithItsOwnKernelAndNoAmx) {
  ScopedKernelIsa level(KernelIsa::kAvx2);
  if (!level.supported()) GTEST_SKIP() << "no AVX2 here";
  const kernel_table::KernelTable& t = kernel_table::ActiveKernelTable();
  EXPECT_TRUE(PackedQ8_0Supported());
  EXPECT_NE(t.packed_q8_0, &MatmulPackedQ8_0Scalar);
  EXPECT_EQ(t.packed_q8_0_wide, t.packed_q8_0);
  EXPECT_FALSE(t.amx);
  EXPECT_EQ(std::string(ActiveKernelsName()), "avx2");
}

TEST(PackedQ8_0DispatchTest, TheAvx512LevelPacksAndItsNameSaysWhetherItUsesAmx) {
  ScopedKernelIsa avx512(KernelIsa::kAvx512);
  if (!avx512.supported()) GTEST_SKIP() << "no AVX-512 VNNI here";
  const kernel_table::KernelTable& t = kernel_table::ActiveKernelTable();
  EXPECT_TRUE(PackedQ8_0Supported());
  EXPECT_NE(t.packed_q8_0, &MatmulPackedQ8_0Scalar);
  EXPECT_EQ(t.amx, AmxAvailable());
  EXPECT_EQ(std::string(ActiveKernelsName()), std::string(t.amx ? "avx512+amx" : "avx512") +
                                                  (DetectedCpuFeatures().avx512bf16 ? "+bf16" : ""));
  if (!t.amx) {
    EXPECT_EQ(t.packed_q8_0_wide, t.packed_q8_0);
  }
}

// A caller splits a matrix into calls of at least this many rows: whole
// groups on every level, and on AVX-512 without AMX, longer calls for a
// fan-out's 5 to 16 rows than for decode's 1 to 4 or prefill's many.
TEST(PackedQ8_0DispatchTest, MinCallRowsAreWholeGroupsAndLongerForFanOutOnAvx512) {
  for (KernelIsa isa : {KernelIsa::kScalar, KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    ScopedKernelIsa level(isa);
    if (!level.supported()) continue;
    for (int nx = 1; nx <= 600; ++nx) {
      const int64_t rows = PackedQ8_0MinCallRows(nx);
      ASSERT_GE(rows, 16) << KernelIsaName(isa) << " nx " << nx;
      ASSERT_EQ(rows % 16, 0) << KernelIsaName(isa) << " nx " << nx;
    }
    if (isa == KernelIsa::kAvx512 && !kernel_table::ActiveKernelTable().amx) {
      EXPECT_GT(PackedQ8_0MinCallRows(8), PackedQ8_0MinCallRows(1));
      EXPECT_GT(PackedQ8_0MinCallRows(16), PackedQ8_0MinCallRows(4));
      EXPECT_GT(PackedQ8_0MinCallRows(5), PackedQ8_0MinCallRows(17));
    }
  }
}

// Run by the kernels_env_overrides test with KVS_KERNELS=scalar and
// KVS_AMX=0 (skipped in a process started without them).
class KernelEnvOverrideTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* kernels = std::getenv("KVS_KERNELS");
    const char* amx = std::getenv("KVS_AMX");
    if (kernels == nullptr || std::string(kernels) != "scalar" || amx == nullptr ||
        std::string(amx) != "0") {
      GTEST_SKIP() << "needs KVS_KERNELS=scalar KVS_AMX=0 (the kernels_env_overrides test)";
    }
  }
};

TEST_F(KernelEnvOverrideTest, KvsKernelsScalarMakesEveryKernelTheScalarOne) {
  EXPECT_EQ(ActiveKernelIsa(), KernelIsa::kScalar);
  EXPECT_EQ(std::string(ActiveKernelsName()), "scalar");
  const kernel_table::KernelTable& active = kernel_table::ActiveKernelTable();
  EXPECT_EQ(&active, &kernel_table::KernelTableFor(KernelIsa::kScalar));
  EXPECT_FALSE(PackedQ8_0Supported());
  EXPECT_EQ(active.packed_q8_0, &MatmulPackedQ8_0Scalar);
  EXPECT_EQ(active.packed_q8_0_wide, &MatmulPackedQ8_0Scalar);
}

TEST_F(KernelEnvOverrideTest, KvsAmxZeroKeepsAmxOutOfTheAvx512Level) {
  EXPECT_FALSE(AmxAvailable());
  if (!KernelIsaSupported(KernelIsa::kAvx512)) return;
  const kernel_table::KernelTable& t = kernel_table::KernelTableFor(KernelIsa::kAvx512);
  EXPECT_FALSE(t.amx);
  EXPECT_FALSE(t.amx_attention);
  EXPECT_EQ(t.packed_q8_0_wide, t.packed_q8_0);
  EXPECT_EQ(std::string(t.name).find("amx"), std::string::npos);
}

}  // namespace
}  // namespace kvs
