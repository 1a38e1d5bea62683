// Q8_0 values (attention_q8_0_values.h): each key's value weight is its
// probability times the block's scale rounded to BF16, or int16 steps of
// its group's largest where the level folds int16 groups, on every kernel
// level and every path (per-query, tiled, in pairs or key by key), for odd
// key counts and blocks.
#include "kernels/attention_q8_0_values.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "kernels/attention_test_util.h"
#include "kernels/fp16.h"
#include "kernels/int16_groups_avx512_probe.h"
#include "kernels/isa_test_util.h"

namespace kvs {
namespace {

TEST(RoundToBf16Test, RoundsToTheNearestBf16TiesToEven) {
  EXPECT_EQ(RoundToBf16(1.0f), 1.0f);
  EXPECT_EQ(RoundToBf16(1.0f + 0x1p-8f), 1.0f) << "a tie goes to the even neighbour, 1";
  EXPECT_EQ(RoundToBf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f) << "a tie goes to the even neighbour, 1 + 2^-6";
  EXPECT_EQ(RoundToBf16(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f) << "above the tie: up";
  EXPECT_EQ(RoundToBf16(-3.0f - 0x1p-9f), -3.0f);
  EXPECT_EQ(RoundToBf16(0x1.fffffep+127f), INFINITY) << "the largest F32 rounds past BF16's largest";
}

TEST(RoundToBf16Test, TurnsSubnormalsIntoZerosOfTheirSign) {
  const float tiny = 0x1p-130f;  // an F32 subnormal
  EXPECT_EQ(RoundToBf16(tiny), 0.0f);
  EXPECT_FALSE(std::signbit(RoundToBf16(tiny)));
  EXPECT_TRUE(std::signbit(RoundToBf16(-tiny)));
  EXPECT_EQ(RoundToBf16(0x1p-126f), 0x1p-126f) << "the smallest normal stays";
}

TEST(Q8_0GroupWeightsTest, ScalesProbabilitiesAndScalesByThePowersOfTwoOfTheirLargest) {
  // P = 0.75 lies in [2^-1, 2^0) and S = 3 in [2^1, 2^2): the step is
  // 2^(-1 + 1 - 13), and each weight p * s * 2^13 rounded.
  const float p[5] = {0.75f, 0.5f, 0.1f, 0.0f, 0.25f};
  const float s[5] = {2.0f, -3.0f, 2.5f, 1.0f, 1e-30f};
  int16_t w[5];
  const float step = Q8_0GroupWeights(p, s, 5, w);
  EXPECT_EQ(step, 0x1p-13f);
  EXPECT_EQ(w[0], 12288) << "0.75 * 2 * 2^13";
  EXPECT_EQ(w[1], -12288) << "0.5 * -3 * 2^13";
  EXPECT_EQ(w[2], 2048) << "0.1 * 2.5 * 2^13 = 2048.0000305 rounds to the nearest";
  EXPECT_EQ(w[3], 0);
  EXPECT_EQ(w[4], 0) << "far below a step";
  for (int j = 0; j < 5; ++j) {
    EXPECT_LE(std::abs(w[j] * static_cast<double>(step) - static_cast<double>(p[j]) * s[j]), 0.5 * 0x1p-13)
        << "key " << j;
  }
}

TEST(Q8_0GroupWeightsTest, GivesTheLargestProductAWeightOfAtLeast2To13) {
  // p and s largest at the same key: p' in [1, 2) and s' in [2^13, 2^14).
  const float p[2] = {0.3f, 0.01f};
  const float s[2] = {-5.0f, 0.5f};
  int16_t w[2];
  const float step = Q8_0GroupWeights(p, s, 2, w);
  EXPECT_EQ(step, 0x1p-2f * 0x1p-11f) << "e(0.3) = -2, e(5) = 2";
  EXPECT_GE(std::abs(w[0]), 1 << 13);
  EXPECT_LT(std::abs(w[0]), 1 << 15);
  EXPECT_EQ(w[0], -12288) << "0.3 * -5 * 2^13, within an F32 rounding";
}

TEST(Q8_0GroupWeightsTest, RoundsTiesToEven) {
  // P = 1 and S = 2^13: the step is 1 and each weight is p * s, rounded;
  // 2.5 and 3.5 are ties.
  const float p[3] = {1.0f, 1.0f, 1.0f};
  const float s[3] = {8192.0f, 2.5f, 3.5f};
  int16_t w[3];
  EXPECT_EQ(Q8_0GroupWeights(p, s, 3, w), 1.0f);
  EXPECT_EQ(w[0], 8192);
  EXPECT_EQ(w[1], 2);
  EXPECT_EQ(w[2], 4);
}

TEST(Q8_0GroupWeightsTest, SaturatesAWeightThatRoundsTo2To15) {
  // p' and s' both just below their octave's top: p' * s' = 32767.99...
  // rounds to 32768, which int16 holds only as a negative.
  const float p[2] = {0x1.fffffep-1f, 0x1.fffffep-1f};
  const float s[2] = {0x1.fffffep0f, -0x1.fffffep0f};
  int16_t w[2];
  EXPECT_EQ(Q8_0GroupWeights(p, s, 2, w), 0x1p-1f * 0x1p-13f);
  EXPECT_EQ(w[0], 32767);
  EXPECT_EQ(w[1], -32768);
}

TEST(Q8_0GroupWeightsTest, GivesAGroupTooSmallToScaleZeroWeightsAndStep) {
  const float tiny_p[2] = {0x1p-100f, 0x1p-130f};  // below 2^-96
  const float ones[2] = {1.0f, 1.0f};
  int16_t w[2] = {7, 7};
  EXPECT_EQ(Q8_0GroupWeights(tiny_p, ones, 2, w), 0.0f);
  EXPECT_EQ(w[0], 0);
  EXPECT_EQ(w[1], 0);
  const float zero_s[2] = {0.0f, -0.0f};
  w[0] = w[1] = 7;
  EXPECT_EQ(Q8_0GroupWeights(ones, zero_s, 2, w), 0.0f) << "a block of zero scales";
  EXPECT_EQ(w[0], 0);
  EXPECT_EQ(w[1], 0);
}

// The AVX-512 level's group operations, called directly, against the
// scalar model bit for bit: every query x block pair of a group, with
// random groups of 1 to 16 keys and the model's edge cases (ties, a weight
// that saturates, probabilities and scales too small to scale, a query of
// zeros, negative scales).
TEST(Q8_0GroupWeightsTest, TheAvx512OperationsGiveTheScalarModelsScalesWeightsAndSteps) {
  if (!KernelIsaSupported(KernelIsa::kAvx512)) GTEST_SKIP() << "no AVX-512 VNNI here";
  namespace probe = int16_groups_probe;
  struct Group {
    int n;               // keys
    float p[4][16] = {};  // four queries' probabilities
    float s[4][16] = {};  // four value blocks' scales
  };
  std::vector<Group> groups;
  Group edges{3};
  for (int t = 0; t < 3; ++t) edges.p[0][t] = 1.0f;                 // ties: 2.5 and 3.5
  edges.p[1][0] = edges.p[1][1] = 0x1.fffffep-1f;                    // saturates with block 1
  edges.p[2][0] = 0x1p-100f;                                         // below 2^-96
  edges.p[2][1] = 0x1p-130f;
  const float block0[3] = {8192.0f, 2.5f, 3.5f}, block1[3] = {0x1.fffffep0f, -0x1.fffffep0f, 1.0f};
  const float block3[3] = {0x1p-100f, -0x1p-99f, 0.0f};             // too small to scale
  for (int t = 0; t < 3; ++t) {
    edges.s[0][t] = block0[t];
    edges.s[1][t] = block1[t];
    edges.s[2][t] = t == 0 ? 0.0f : -0.0f;                           // zero scales
    edges.s[3][t] = block3[t];
  }
  groups.push_back(edges);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f), scale(-2.0f, 2.0f);
  for (int g = 0; g < 200; ++g) {
    Group r{1 + g % 16};
    for (int i = 0; i < 4; ++i) {
      for (int t = 0; t < r.n; ++t) {
        r.p[i][t] = unit(rng) * (g % 5 == 0 ? 0x1p-40f : 1.0f);
        r.s[i][t] = Fp16ToFp32(Fp32ToFp16(scale(rng)));
      }
    }
    groups.push_back(r);
  }
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const Group& g = groups[gi];
    SCOPED_TRACE(testing::Message() << "group " << gi << ", " << g.n << " keys");
    for (int blocks : {2, 4}) {
      float scaled[4][16], scale_steps[4];
      std::memcpy(scaled, g.s, sizeof scaled);
      probe::ScaleGroupScales(scaled, blocks, scale_steps);
      for (int b = 0; b < blocks; ++b) {
        float want[16];
        EXPECT_EQ(scale_steps[b], Q8_0GroupScales(g.s[b], 16, want)) << "block " << b;
        for (int t = 0; t < 16; ++t) EXPECT_EQ(scaled[b][t], want[t]) << "block " << b << ", key " << t;
      }
      int16_t w[4][probe::kChunkWeights];
      float steps[4][4];
      probe::StoreGroupWeights(g.p, 4, blocks, scaled, scale_steps, w, steps);
      for (int q = 0; q < 4; ++q) {
        for (int b = 0; b < blocks; ++b) {
          int16_t want[16] = {};
          EXPECT_EQ(steps[q][b], Q8_0GroupWeights(g.p[q], g.s[b], g.n, want)) << "query " << q << ", block " << b;
          for (int t = 0; t < 16; ++t) {
            EXPECT_EQ(w[q][probe::WeightIndex(b, t)], want[t]) << "query " << q << ", block " << b << ", key " << t;
          }
        }
      }
    }
  }
}

// A q8_0 row of hd values: every block's scale `scale` (F16 bits) and
// quants from `quants`.
std::vector<uint8_t> Q8_0Row(int hd, uint16_t scale, const std::vector<int8_t>& quants) {
  std::vector<uint8_t> row(KvBytes(KvDtype::kQ8_0, hd));
  for (int b = 0; b < hd / 32; ++b) {
    std::memcpy(row.data() + b * kKvQ8_0BlockBytes, &scale, 2);
    std::memcpy(row.data() + b * kKvQ8_0BlockBytes + 2, quants.data() + b * 32, 32);
  }
  return row;
}

// With every score equal (zero keys), each visible key's probability is
// exactly 1, so a query's output is sum_j RoundToBf16(scale_j) * quant_jd
// over its n keys, divided by n; where the level folds int16 groups, the
// sum over each group (keys [16g, 16g + 16) of a block that the row sees)
// of step_g * sum_j w_j * quant_jd (Q8_0GroupWeights of probabilities 1
// and the scales). The
// scales are F16 values BF16 cannot hold (11 significant bits), so an
// unrounded weight misses by up to 2^-8; an int16 one by at most a step
// (half a step unless it saturates), which the test also checks against the unrounded sum.
TEST(AttentionQ8_0ValuesTest, EveryLevelWeighsAKeysValuesAsItsContractSays) {
  const bool tiled_before = TiledAttentionInUse();
  for (KernelIsa isa : AllKernelIsas()) {
    if (!KernelIsaSupported(isa)) continue;
    ScopedKernelIsa active(isa);
    for (int hd : {64, 128}) {
      for (int block : {16, 32}) {
        for (bool tiled : {false, true}) {
          UseTiledAttention(tiled);
          const int n_keys = 37, rows = 9, heads = 2;
          const int n_blocks = (n_keys + block - 1) / block;
          const size_t rb = KvBytes(KvDtype::kQ8_0, hd);
          std::mt19937 rng(static_cast<unsigned>(hd * 7 + block));
          std::uniform_int_distribution<int> quant(-127, 127), mantissa(0, 1023);
          std::vector<uint8_t> k(static_cast<size_t>(n_blocks) * block * rb, 0), v(k.size(), 0);
          std::vector<float> scales(n_keys);
          std::vector<std::vector<int8_t>> quants(n_keys, std::vector<int8_t>(hd));
          for (int j = 0; j < n_keys; ++j) {
            // 0.5 to 1 in F16: exponent 14, 10 random mantissa bits.
            const uint16_t scale = static_cast<uint16_t>((14 << 10) | mantissa(rng));
            scales[j] = Fp16ToFp32(scale);
            for (int8_t& q : quants[j]) q = static_cast<int8_t>(quant(rng));
            const std::vector<uint8_t> row = Q8_0Row(hd, scale, quants[j]);
            std::memcpy(v.data() + j * rb, row.data(), rb);
          }
          v = ValuesAsCached(KvDtype::kQ8_0, v.data(), n_keys, hd, block);  // as a page of `block` holds them
          std::vector<const void*> kb(n_blocks), vb(n_blocks);
          for (int b = 0; b < n_blocks; ++b) {
            kb[b] = k.data() + static_cast<size_t>(b) * block * rb;
            vb[b] = v.data() + static_cast<size_t>(b) * block * rb;
          }
          std::vector<float> q(static_cast<size_t>(rows) * heads * hd);
          std::normal_distribution<float> nd(0, 1);
          for (float& x : q) x = nd(rng);
          std::vector<int> visible(rows);
          for (int r = 0; r < rows; ++r) visible[r] = n_keys - rows + 1 + r;  // odd and even counts
          std::vector<float> m(rows * heads), l(rows * heads), acc(rows * heads * hd), out(rows * heads * hd);
          std::vector<float> scratch(AttentionBlocksScratchFloats(n_keys, block, hd, heads));
          AttentionInit(rows * heads, hd, m.data(), l.data(), acc.data());
          AttentionUpdateBlocks(KvDtype::kQ8_0, q.data(), heads * hd, rows, heads, kb.data(), vb.data(), n_blocks,
                                block, hd, visible.data(), 0.1f, m.data(), l.data(), acc.data(), scratch.data());
          AttentionFinish(rows, heads, hd, l.data(), acc.data(), out.data(), heads * hd);
          const bool groups = Q8_0ValuesInInt16Groups(hd);
          for (int r = 0; r < rows; ++r) {
            // Key j's weight, times its step where the level folds groups.
            std::vector<double> weight(visible[r]), step(visible[r], 1.0);
            double slack = 0;  // int16 groups: a step per key
            for (int j = 0; j < visible[r]; ++j) weight[j] = RoundToBf16(scales[j]);
            if (groups) {
              for (int g0 = 0; g0 < visible[r];) {  // a group: keys [16g, 16g + 16) of a block
                const int block_end = (g0 / block + 1) * block;
                const int g1 = std::min({g0 + kQ8_0ValueGroupKeys - (g0 % block) % kQ8_0ValueGroupKeys,
                                         block_end, visible[r]});
                int16_t w[kQ8_0ValueGroupKeys];
                const float ones[kQ8_0ValueGroupKeys] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
                const float s = Q8_0GroupWeights(ones, scales.data() + g0, g1 - g0, w);
                for (int j = g0; j < g1; ++j) {
                  weight[j] = w[j - g0];
                  step[j] = s;
                }
                slack += s * 127 * (g1 - g0);
                g0 = g1;
              }
            }
            for (int d = 0; d < hd; ++d) {
              double want = 0, unrounded = 0;
              for (int j = 0; j < visible[r]; ++j) {
                want += weight[j] * step[j] * quants[j][d];
                unrounded += static_cast<double>(scales[j]) * quants[j][d];
              }
              want /= visible[r];
              unrounded /= visible[r];
              for (int h = 0; h < heads; ++h) {
                const float got = out[(r * heads + h) * hd + d];
                ASSERT_NEAR(got, want, 2e-6 * (1 + std::abs(want)))
                    << KernelIsaName(isa) << (tiled ? " tiled" : " per-query") << (groups ? " int16 groups" : "")
                    << " hd " << hd << " block " << block << " row " << r << " d " << d
                    << " (unrounded weights give " << unrounded << ")";
                if (groups) {
                  ASSERT_NEAR(got, unrounded, slack / visible[r] + 2e-6 * (1 + std::abs(want)));
                }
              }
            }
          }
        }
      }
    }
  }
  UseTiledAttention(tiled_before);
}

}  // namespace
}  // namespace kvs
