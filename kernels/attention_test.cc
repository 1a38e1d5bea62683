#include "kernels/attention.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention_test_util.h"
#include "kernels/fp16.h"

namespace kvs {
namespace {

// Naive causal attention in double for one query over keys [0, n) of a
// cache of type dtype (values v, bytes vc), folded in online-softmax steps
// of `step` keys, one block each (NaiveValues).
NaiveValueSum NaiveAttention(KvDtype dtype, const float* q, const std::vector<float>& k,
                             const std::vector<float>& v, const uint8_t* vc, int n, int hd, float scale,
                             int step) {
  std::vector<double> s(n);
  for (int j = 0; j < n; ++j) {
    double d = 0;
    for (int c = 0; c < hd; ++c) d += static_cast<double>(q[c]) * k[j * hd + c];
    s[j] = d * scale;
  }
  std::vector<int> step_ends;
  for (int end = step; end < n + step; end += step) step_ends.push_back(std::min(end, n));
  return NaiveValues(dtype, s, step_ends, v, vc, hd, step);
}

class AttentionTest : public ::testing::TestWithParam<KvDtype> {};

TEST_P(AttentionTest, BlockedOnlineSoftmaxEqualsNaiveCausalAttention) {
  const KvDtype dtype = GetParam();
  const int hd = 32, block = 16, n_keys = 53, nq = 5;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> k(n_keys * hd), v(n_keys * hd), q(nq * hd);
  for (float& x : k) x = nd(rng);
  for (float& x : v) x = nd(rng);
  for (float& x : q) x = 2 * nd(rng);
  // Round-trip K/V through the cache type so the reference sees the same values.
  std::vector<uint8_t> kc(KvBytes(dtype, n_keys * hd)), vc(kc.size());
  StoreKv(dtype, k.data(), kc.data(), k.size());
  StoreKv(dtype, v.data(), vc.data(), v.size());
  LoadKv(dtype, kc.data(), k.data(), k.size());
  LoadKv(dtype, vc.data(), v.data(), v.size());
  KeysAsCached(dtype, kc, n_keys, hd);

  // Query i sits at position pos[i] (causal: it sees keys 0..pos[i]).
  int pos[nq];
  for (int i = 0; i < nq; ++i) pos[i] = std::min(n_keys - 1, 28 + 6 * i);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> m(nq), l(nq), acc(nq * hd), out(nq * hd);
  std::vector<float> scratch(AttentionScratchFloats(block, hd));
  AttentionInit(nq, hd, m.data(), l.data(), acc.data());
  for (int b0 = 0; b0 < n_keys; b0 += block) {
    const int nb = std::min(block, n_keys - b0);
    int visible[nq];
    for (int i = 0; i < nq; ++i) visible[i] = std::clamp(pos[i] - b0 + 1, 0, nb);
    const size_t off = KvBytes(dtype, b0 * hd);
    // A block of nb values as a page of nb tokens holds them.
    const std::vector<uint8_t> values = ValuesAsCached(dtype, vc.data() + off, nb, hd, nb);
    AttentionUpdate(dtype, q.data(), hd, nq, 1, kc.data() + off, values.data(), nb, hd,
                    visible, scale, m.data(), l.data(), acc.data(), scratch.data());
  }
  AttentionFinish(nq, 1, hd, l.data(), acc.data(), out.data(), hd);
  const std::vector<float> scored = QueriesAsScored(dtype, q, hd);  // q8_0: rounded as llama.cpp does
  for (int i = 0; i < nq; ++i) {
    const NaiveValueSum ref =
        NaiveAttention(dtype, scored.data() + i * hd, k, v, vc.data(), pos[i] + 1, hd, scale, block);
    for (int c = 0; c < hd; ++c) EXPECT_NEAR(out[i * hd + c], ref.out[c], 1e-5 + ref.slack[c]) << i << "," << c;
  }
}

TEST(AttentionGqaTest, GroupedHeadsEqualOneHeadAtATime) {
  // 3 rows (tokens) x 4 query heads sharing one KV head, in one call, must
  // equal 12 separate single-query calls.
  const int hd = 16, n_keys = 20, rows = 3, heads = 4;
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> k(n_keys * hd), v(n_keys * hd), q(rows * heads * hd);
  for (float& x : k) x = nd(rng);
  for (float& x : v) x = nd(rng);
  for (float& x : q) x = nd(rng);
  const int visible[rows] = {5, 20, 13};
  std::vector<float> scratch(AttentionScratchFloats(n_keys, hd));
  std::vector<float> m(rows * heads), l(rows * heads), acc(rows * heads * hd), out(rows * heads * hd);
  AttentionInit(rows * heads, hd, m.data(), l.data(), acc.data());
  AttentionUpdate(KvDtype::kF32, q.data(), heads * hd, rows, heads, k.data(), v.data(), n_keys, hd,
                  visible, 0.25f, m.data(), l.data(), acc.data(), scratch.data());
  AttentionFinish(rows, heads, hd, l.data(), acc.data(), out.data(), heads * hd);
  for (int r = 0; r < rows; ++r) {
    for (int h = 0; h < heads; ++h) {
      float m1, l1, acc1[hd], out1[hd];
      AttentionInit(1, hd, &m1, &l1, acc1);
      const float* q1 = q.data() + (r * heads + h) * hd;
      AttentionUpdate(KvDtype::kF32, q1, hd, 1, 1, k.data(), v.data(), n_keys, hd, &visible[r],
                      0.25f, &m1, &l1, acc1, scratch.data());
      AttentionFinish(1, 1, hd, &l1, acc1, out1, hd);
      for (int d = 0; d < hd; ++d) EXPECT_FLOAT_EQ(out[(r * heads + h) * hd + d], out1[d]);
    }
  }
}

TEST(KvStoreTest, Q8_0RowsAreLlamaCppQ8_0BlocksOfAnF16ScaleAndInt8Quants) {
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0, 3);
  std::vector<float> x(4 * 32);
  for (float& v : x) v = nd(rng);
  for (int i = 0; i < 32; ++i) x[64 + i] = 0;  // an all-zero block
  x[100] = -40;                                // a block whose largest value is negative
  std::vector<uint8_t> row(KvBytes(KvDtype::kQ8_0, 128));
  ASSERT_EQ(row.size(), 4u * 34);
  StoreKv(KvDtype::kQ8_0, x.data(), row.data(), 128);
  std::vector<float> back(128);
  LoadKv(KvDtype::kQ8_0, row.data(), back.data(), 128);
  for (int b = 0; b < 4; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    uint16_t scale_bits;
    std::memcpy(&scale_bits, row.data() + b * 34, 2);
    EXPECT_EQ(scale_bits, Fp32ToFp16(amax / 127)) << b;
    const float d = Fp16ToFp32(scale_bits);
    for (int i = 0; i < 32; ++i) {
      const int8_t quant = static_cast<int8_t>(row[b * 34 + 2 + i]);
      EXPECT_EQ(back[b * 32 + i], d * quant) << b << "," << i;  // exact
      EXPECT_LE(std::fabs(back[b * 32 + i] - x[b * 32 + i]), 0.5f * d + 1e-3f * amax) << b << "," << i;
      if (std::fabs(x[b * 32 + i]) == amax && amax > 0) {
        EXPECT_EQ(std::abs(quant), 127) << b << "," << i;
      }
    }
  }
  EXPECT_EQ(static_cast<int8_t>(row[3 * 34 + 2 + 4]), -127);  // x[100] = -40, the block's largest
  for (int i = 64; i < 96; ++i) EXPECT_EQ(back[i], 0.0f);
}

TEST(KvStoreTest, Bf16ValuesAreRoundedToNearestEven) {
  const float x[] = {1.0f, 1.00390625f /* a tie: stays 1 */, 1.01171875f /* a tie: rounds up */, -3.3f, 1e30f};
  uint16_t stored[5];
  float back[5];
  StoreKv(KvDtype::kBF16, x, stored, 5);
  LoadKv(KvDtype::kBF16, stored, back, 5);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], 1.0f);
  EXPECT_EQ(back[2], 1.015625f);
  EXPECT_NEAR(back[3], -3.3f, 3.3f / 256);
  EXPECT_NEAR(back[4], 1e30f, 1e30f / 256);
}

INSTANTIATE_TEST_SUITE_P(KvTypes, AttentionTest,
                         ::testing::Values(KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16, KvDtype::kQ8_0),
                         [](const auto& info) { return std::string(KvDtypeName(info.param)); });

}  // namespace
}  // namespace kvs
