// AttentionUpdateHeads (attention.h): a decode row's queries of several KV
// heads in one call get the bits of an AttentionUpdateBlocks call per head,
// on every kernel level the CPU supports (and on AMX where the binary runs
// with KVS_AMX_ATTENTION=1: kernels_amx_attention), for every KV type,
// register-resident head sizes and the fallback, GQA groups of 1, 2 and 4,
// pages of 16 and 32 keys, and contexts shorter than one span of pages,
// ending inside one, and several spans long.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "kernels/attention_test_util.h"
#include "kernels/isa_test_util.h"

namespace kvs {
namespace {

struct State {
  std::vector<float> max, sum, acc;
};

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// kv_heads heads' K and V blocks in the pool's layout: per page, the
// heads' blocks side by side (K of every head, then V of every head).
class Pages {
 public:
  Pages(KvDtype dtype, int head_dim, int kv_heads, int n_pages, int block_keys, uint32_t seed)
      : kv_heads_(kv_heads), n_pages_(n_pages) {
    block_bytes_ = static_cast<size_t>(block_keys) * KvBytes(dtype, head_dim);
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0, 1);
    std::vector<float> f(static_cast<size_t>(block_keys) * head_dim);
    for (int p = 0; p < n_pages; ++p) {
      pages_.emplace_back(2 * kv_heads * block_bytes_);
      for (int b = 0; b < 2 * kv_heads; ++b) {
        for (float& x : f) x = nd(rng);
        uint8_t* blk = pages_.back().data() + b * block_bytes_;
        StoreKv(dtype, f.data(), blk, static_cast<int64_t>(f.size()));
        if (b < kv_heads) {
          KeysAsCached(dtype, blk, block_keys, head_dim);
        } else {
          std::memcpy(blk, ValuesAsCached(dtype, blk, block_keys, head_dim, block_keys).data(), block_bytes_);
        }
      }
    }
  }
  // Head h's K (part 0) or V (part 1) block of page p.
  const void* block(int p, int part, int h) const {
    return pages_[p].data() + (static_cast<size_t>(part) * kv_heads_ + h) * block_bytes_;
  }
  // Per head in turn, its blocks of every page (AttentionUpdateHeads' lists).
  std::vector<const void*> Lists(int part) const {
    std::vector<const void*> list;
    for (int h = 0; h < kv_heads_; ++h) {
      for (int p = 0; p < n_pages_; ++p) list.push_back(block(p, part, h));
    }
    return list;
  }

 private:
  int kv_heads_, n_pages_;
  size_t block_bytes_;
  std::vector<std::vector<uint8_t>> pages_;
};

struct Case {
  KvDtype dtype;
  int head_dim, heads, kv_heads, block_keys, visible;
};

std::string Describe(const Case& c) {
  return std::string(KvDtypeName(c.dtype)) + " head_dim " + std::to_string(c.head_dim) + " heads " +
         std::to_string(c.heads) + " kv_heads " + std::to_string(c.kv_heads) + " pages of " +
         std::to_string(c.block_keys) + " visible " + std::to_string(c.visible);
}

// The row through AttentionUpdateHeads (`together`) or an
// AttentionUpdateBlocks call per head, from the same non-trivial state
// (a first fold of a few keys, as an earlier call leaves it).
State Attend(const Case& c, const Pages& pages, int n_pages, const std::vector<float>& q, bool together) {
  const int nq = c.kv_heads * c.heads;
  State st{std::vector<float>(nq), std::vector<float>(nq), std::vector<float>(static_cast<size_t>(nq) * c.head_dim)};
  std::vector<float> scratch(AttentionBlocksScratchFloats(n_pages * c.block_keys, c.block_keys, c.head_dim, c.heads));
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  AttentionInit(nq, c.head_dim, st.max.data(), st.sum.data(), st.acc.data());
  for (int h = 0; h < c.kv_heads; ++h) {
    const void* k = pages.block(n_pages - 1, 0, h);
    const void* v = pages.block(n_pages - 1, 1, h);
    const int first = 5;
    const size_t i = static_cast<size_t>(h) * c.heads;
    AttentionUpdateBlocks(c.dtype, q.data() + i * c.head_dim, 0, 1, c.heads, &k, &v, 1, c.block_keys, c.head_dim,
                          &first, scale, st.max.data() + i, st.sum.data() + i, st.acc.data() + i * c.head_dim,
                          scratch.data());
  }
  const std::vector<const void*> k = pages.Lists(0), v = pages.Lists(1);
  if (together) {
    AttentionUpdateHeads(c.dtype, q.data(), c.heads, c.kv_heads, k.data(), v.data(), n_pages, c.block_keys,
                         c.head_dim, c.visible, scale, st.max.data(), st.sum.data(), st.acc.data(), scratch.data());
    return st;
  }
  for (int h = 0; h < c.kv_heads; ++h) {
    const size_t i = static_cast<size_t>(h) * c.heads;
    AttentionUpdateBlocks(c.dtype, q.data() + i * c.head_dim, 0, 1, c.heads, k.data() + h * n_pages,
                          v.data() + h * n_pages, n_pages, c.block_keys, c.head_dim, &c.visible, scale,
                          st.max.data() + i, st.sum.data() + i, st.acc.data() + i * c.head_dim, scratch.data());
  }
  return st;
}

class AttentionHeadsTest : public KernelIsaTest {};

TEST_P(AttentionHeadsTest, ADecodeRowOfSeveralKvHeadsGetsTheBitsOfACallPerHead) {
  ScopedKernelIsa active(GetParam());
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16, KvDtype::kQ8_0}) {
    for (int head_dim : {64, 128, 96}) {
      if (!KvDtypeFitsHeadDim(dtype, head_dim)) continue;
      for (int heads : {1, 2, 4}) {
        for (int block_keys : {16, 32}) {
          // One key; less than a span; a span and part of a page; several
          // spans (spans are 256 keys at these page sizes).
          for (int visible : {1, 37, 256 + 9, 3 * 256 + block_keys}) {
            const int kv_heads = heads == 4 ? 8 : 4;  // 32 queries at most: one tile
            const Case c{dtype, head_dim, heads, kv_heads, block_keys, visible};
            const int n_pages = (visible + block_keys - 1) / block_keys;
            const Pages pages(dtype, head_dim, kv_heads, n_pages, block_keys, static_cast<uint32_t>(visible + heads));
            std::vector<float> q(static_cast<size_t>(kv_heads) * heads * head_dim);
            std::mt19937 rng(visible);
            std::normal_distribution<float> nd(0, 1);
            for (float& x : q) x = nd(rng);
            const State together = Attend(c, pages, n_pages, q, true);
            const State alone = Attend(c, pages, n_pages, q, false);
            EXPECT_TRUE(SameBits(together.max, alone.max)) << Describe(c);
            EXPECT_TRUE(SameBits(together.sum, alone.sum)) << Describe(c);
            EXPECT_TRUE(SameBits(together.acc, alone.acc)) << Describe(c);
          }
        }
      }
    }
  }
}

TEST_P(AttentionHeadsTest, MoreQueriesThanATileHoldsStillGetTheBitsOfACallPerHead) {
  ScopedKernelIsa active(GetParam());
  // 8 KV heads of 8 query heads: 64 queries, more than one tile.
  const Case c{KvDtype::kQ8_0, 128, 8, 8, 16, 300};
  const int n_pages = (c.visible + c.block_keys - 1) / c.block_keys;
  const Pages pages(c.dtype, c.head_dim, c.kv_heads, n_pages, c.block_keys, 3);
  std::vector<float> q(static_cast<size_t>(c.kv_heads) * c.heads * c.head_dim);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0, 1);
  for (float& x : q) x = nd(rng);
  const State together = Attend(c, pages, n_pages, q, true);
  const State alone = Attend(c, pages, n_pages, q, false);
  EXPECT_TRUE(SameBits(together.max, alone.max));
  EXPECT_TRUE(SameBits(together.sum, alone.sum));
  EXPECT_TRUE(SameBits(together.acc, alone.acc));
}

INSTANTIATE_TEST_SUITE_P(Levels, AttentionHeadsTest, ::testing::ValuesIn(AllKernelIsas()),
                         [](const ::testing::TestParamInfo<KernelIsa>& info) {
                           return std::string(KernelIsaName(info.param));
                         });

}  // namespace
}  // namespace kvs
