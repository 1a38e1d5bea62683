// The tiled attention kernel (simd_attention_tiled.h), on every kernel
// level the CPU supports: each query gets the per-query kernel's bits
// whatever the row count, GQA group, head size, block size or causal
// visibility (partial tiles, partial key groups, rows that see nothing),
// and stays within 1e-5 of the scalar reference.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "kernels/attention_test_util.h"
#include "kernels/isa_test_util.h"

namespace kvs {
namespace {

struct Shape {
  int head_dim;
  int heads;  // query heads per KV head
  int rows;
  int block;  // keys per block
  int n_keys;
  int first_pos;  // row r sees keys [0, first_pos + r + 1)
};

std::string Describe(const Shape& s) {
  return "hd " + std::to_string(s.head_dim) + " heads " + std::to_string(s.heads) + " rows " +
         std::to_string(s.rows) + " block " + std::to_string(s.block) + " keys " +
         std::to_string(s.n_keys) + " first_pos " + std::to_string(s.first_pos);
}

// Scoped choice of the kernel for many queries.
class ScopedTiled {
 public:
  explicit ScopedTiled(bool tiled) : previous_(TiledAttentionInUse()) { UseTiledAttention(tiled); }
  ~ScopedTiled() { UseTiledAttention(previous_); }

 private:
  bool previous_;
};

// Causal attention of s.rows x s.heads queries over the blocks, folded in
// two calls (the first third of the blocks, then the rest) as a long
// context is; returns AttentionFinish's output.
std::vector<float> Attend(KvDtype dtype, const Shape& s, const std::vector<float>& q,
                          const std::vector<const void*>& kb, const std::vector<const void*>& vb) {
  const int nq = s.rows * s.heads, n_blocks = static_cast<int>(kb.size());
  std::vector<float> m(nq), l(nq), acc(static_cast<size_t>(nq) * s.head_dim), out(acc.size());
  std::vector<float> scratch(AttentionBlocksScratchFloats(n_blocks * s.block, s.block, s.head_dim, s.heads));
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  AttentionInit(nq, s.head_dim, m.data(), l.data(), acc.data());
  const int split = n_blocks / 3;
  std::vector<int> vis_a(s.rows), vis_b(s.rows);
  for (int r = 0; r < s.rows; ++r) {
    const int visible = std::min(s.first_pos + r + 1, s.n_keys);
    vis_a[r] = std::min(visible, split * s.block);
    vis_b[r] = std::max(0, visible - split * s.block);
  }
  if (split > 0) {
    AttentionUpdateBlocks(dtype, q.data(), s.heads * s.head_dim, s.rows, s.heads, kb.data(), vb.data(),
                          split, s.block, s.head_dim, vis_a.data(), scale, m.data(), l.data(), acc.data(),
                          scratch.data());
  }
  AttentionUpdateBlocks(dtype, q.data(), s.heads * s.head_dim, s.rows, s.heads, kb.data() + split,
                        vb.data() + split, n_blocks - split, s.block, s.head_dim, vis_b.data(), scale,
                        m.data(), l.data(), acc.data(), scratch.data());
  AttentionFinish(s.rows, s.heads, s.head_dim, l.data(), acc.data(), out.data(), s.heads * s.head_dim);
  return out;
}

class AttentionTiledTest : public KernelIsaTest {};

TEST_P(AttentionTiledTest, EveryQueryGetsThePerQueryKernelsBitsAndTheScalarResult) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0, 1);
  std::vector<Shape> shapes;
  for (int hd : {64, 80, 128}) {
    for (int heads : {1, 2, 4}) {
      shapes.push_back({hd, heads, 1, 16, 40, 39});     // one row (decode)
      shapes.push_back({hd, heads, 2, 16, 40, 38});     // below the tile's minimum for heads 1
      shapes.push_back({hd, heads, 16, 16, 200, 184});  // an engine block of rows
      shapes.push_back({hd, heads, 21, 7, 61, 40});     // partial tiles, blocks of 7 keys
      shapes.push_back({hd, heads, 9, 20, 95, 3});      // groups split by blocks of 20
    }
  }
  shapes.push_back({128, 2, 16, 256, 600, 584});      // long pages
  shapes.push_back({128, 2, 33, 16, 300, 0});         // rows that see nothing in the first call
  shapes.push_back({16, 4, 12, 16, 70, 58});          // one vector per head
  // Heads without a fixed kernel at some level (the fallback: all of them
  // at AVX2, 96, 160, 192, 224 and 512 at AVX-512), every cache type:
  // a q8_0 cache's weights are rounded against the context's max, as the
  // reference rounds them, not a block's.
  for (int hd : {96, 160, 192, 224, 256, 512}) shapes.push_back({hd, 2, 4, 16, 50, 40});
  for (KvDtype dtype : {KvDtype::kF16, KvDtype::kF32, KvDtype::kBF16, KvDtype::kQ8_0}) {
    for (const Shape& s : shapes) {
      if (!KvDtypeFitsHeadDim(dtype, s.head_dim)) continue;
      // A q8_0 cache's pages hold whole key groups of 16 (q8_0_kv_blocks.h).
      if (dtype == KvDtype::kQ8_0 && s.block % kQ8_0KeyGroupSlots != 0) continue;
      const int n_blocks = (s.n_keys + s.block - 1) / s.block, keys = n_blocks * s.block;
      std::vector<float> q(static_cast<size_t>(s.rows) * s.heads * s.head_dim),
          kf(static_cast<size_t>(keys) * s.head_dim), vf(kf.size());
      for (float& x : q) x = 2 * nd(rng);
      for (float& x : kf) x = nd(rng);
      for (float& x : vf) x = nd(rng);
      const size_t block_bytes = static_cast<size_t>(s.block) * KvBytes(dtype, s.head_dim);
      std::vector<uint8_t> k(n_blocks * block_bytes), v(k.size());
      StoreKv(dtype, kf.data(), k.data(), kf.size());
      StoreKv(dtype, vf.data(), v.data(), vf.size());
      if (dtype == KvDtype::kQ8_0) {  // each block's keys and values as a q8_0 cache's page holds them
        for (int b = 0; b < n_blocks; ++b) KeysAsCached(dtype, k.data() + b * block_bytes, s.block, s.head_dim);
        v = ValuesAsCached(dtype, v.data(), keys, s.head_dim, s.block);
      }
      std::vector<const void*> kb(n_blocks), vb(n_blocks);
      for (int b = 0; b < n_blocks; ++b) {  // blocks in reverse memory order, as pages may be
        kb[b] = k.data() + (n_blocks - 1 - b) * block_bytes;
        vb[b] = v.data() + (n_blocks - 1 - b) * block_bytes;
      }
      std::vector<float> want, per_query, tiled;
      {
        ScopedKernelIsa scalar(KernelIsa::kScalar);
        want = Attend(dtype, s, q, kb, vb);
      }
      ScopedKernelIsa active(GetParam());
      {
        ScopedTiled off(false);
        per_query = Attend(dtype, s, q, kb, vb);
      }
      {
        ScopedTiled on(true);
        tiled = Attend(dtype, s, q, kb, vb);
      }
      // A q8_0 cache's values where this level's contract is not the scalar one's.
      const double gap = dtype == KvDtype::kQ8_0 ? Q8_0ContractGap(s.head_dim, MaxAbs(vf)) : 0;
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_TRUE(SameBits(tiled[i], per_query[i]))
            << KvDtypeName(dtype) << " " << Describe(s) << " i " << i << ": " << tiled[i] << " vs " << per_query[i];
        ASSERT_NEAR(tiled[i], want[i], 1e-5 + gap) << KvDtypeName(dtype) << " " << Describe(s) << " i " << i;
      }
    }
  }
}

TEST_P(AttentionTiledTest, AQueryAloneGetsTheBitsItGetsInAFullTile) {
  ScopedKernelIsa active(GetParam());
  ScopedTiled on(true);
  std::mt19937 rng(12);
  std::normal_distribution<float> nd(0, 1);
  const Shape full{128, 2, 16, 16, 100, 84};
  std::vector<float> q(static_cast<size_t>(full.rows) * full.heads * full.head_dim),
      kf(static_cast<size_t>(112) * full.head_dim), vf(kf.size());
  for (float& x : q) x = nd(rng);
  for (float& x : kf) x = nd(rng);
  for (float& x : vf) x = nd(rng);
  std::vector<uint16_t> k(kf.size()), v(vf.size());
  StoreKv(KvDtype::kF16, kf.data(), k.data(), kf.size());
  StoreKv(KvDtype::kF16, vf.data(), v.data(), vf.size());
  std::vector<const void*> kb, vb;
  for (int b = 0; b < 7; ++b) {
    kb.push_back(k.data() + b * 16 * full.head_dim);
    vb.push_back(v.data() + b * 16 * full.head_dim);
  }
  const std::vector<float> together = Attend(KvDtype::kF16, full, q, kb, vb);
  for (int r : {0, 5, 15}) {
    const Shape one{full.head_dim, full.heads, 1, full.block, full.n_keys, full.first_pos + r};
    const size_t at = static_cast<size_t>(r) * full.heads * full.head_dim;
    std::vector<float> q1(q.begin() + at, q.begin() + at + full.heads * full.head_dim);
    const std::vector<float> alone = Attend(KvDtype::kF16, one, q1, kb, vb);
    for (size_t d = 0; d < alone.size(); ++d) ASSERT_TRUE(SameBits(together[at + d], alone[d])) << r << " " << d;
  }
}

// kernels_attention_per_query (kernels/CMakeLists.txt) runs this with
// KVS_ATTENTION=per-query; kernels_test without it.
TEST(AttentionKernelChoiceTest, KvsAttentionPerQueryStartsTheProcessWithThePerQueryKernel) {
  const char* env = std::getenv("KVS_ATTENTION");
  const bool per_query = env != nullptr && std::string(env) == "per-query";
  EXPECT_EQ(TiledAttentionInUse(), !per_query);
  {
    ScopedTiled flip(per_query);
    EXPECT_EQ(TiledAttentionInUse(), per_query);
  }
  EXPECT_EQ(TiledAttentionInUse(), !per_query);
}

INSTANTIATE_TEST_SUITE_P(AllLevels, AttentionTiledTest, ::testing::ValuesIn(AllKernelIsas()),
                         [](const auto& info) { return std::string(KernelIsaName(info.param)); });

}  // namespace
}  // namespace kvs
