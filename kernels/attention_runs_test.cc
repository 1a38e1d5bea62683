// AttentionUpdateRuns (attention.h): a batch of sequences, some of them
// forks sharing their prompt's pages, gives every query the bits of its own
// AttentionUpdateBlocks call, on every kernel level the CPU supports, for
// every KV type, register-resident head sizes and the fallback, GQA groups
// of 1, 2 and 4, decode rows and prefill runs; and AttentionSharedBlocks
// finds the pages that are the same for all runs.
#include <algorithm>
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

constexpr int kBlock = 16;  // keys per block (page)

// Blocks of random keys and values of one KV type, each in its own buffer.
class Blocks {
 public:
  Blocks(KvDtype dtype, int head_dim, int count, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0, 1);
    std::vector<float> f(static_cast<size_t>(kBlock) * head_dim);
    for (int b = 0; b < 2 * count; ++b) {
      for (float& x : f) x = nd(rng);
      data_.emplace_back(KvBytes(dtype, static_cast<int64_t>(f.size())));
      StoreKv(dtype, f.data(), data_.back().data(), static_cast<int64_t>(f.size()));
      if (b % 2 == 0) {
        KeysAsCached(dtype, data_.back().data(), kBlock, head_dim);
      } else {
        data_.back() = ValuesAsCached(dtype, data_.back().data(), kBlock, head_dim, kBlock);
      }
    }
  }
  const void* k(int b) const { return data_[2 * b].data(); }
  const void* v(int b) const { return data_[2 * b + 1].data(); }

 private:
  std::vector<std::vector<uint8_t>> data_;
};

// One sequence of a batch: its block numbers (in a Blocks) and the
// visible key count of each of its rows.
struct Sequence {
  std::vector<int> blocks;
  std::vector<int> visible;
};

struct State {
  std::vector<float> max, sum, acc;
};

// The batch through AttentionUpdateRuns (`together`) or one
// AttentionUpdateBlocks call per sequence, from the same non-trivial state
// (a first fold of a few random keys, as an earlier call leaves it).
State Attend(KvDtype dtype, int head_dim, int heads, const Blocks& blocks, const std::vector<Sequence>& batch,
             const std::vector<float>& q, bool together) {
  int rows = 0, most_keys = 0;
  for (const Sequence& s : batch) {
    rows += static_cast<int>(s.visible.size());
    most_keys = std::max(most_keys, static_cast<int>(s.blocks.size()) * kBlock);
  }
  const int nq = rows * heads;
  State st{std::vector<float>(nq), std::vector<float>(nq), std::vector<float>(static_cast<size_t>(nq) * head_dim)};
  std::vector<float> scratch(AttentionBlocksScratchFloats(most_keys, kBlock, head_dim, heads));
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int64_t stride = static_cast<int64_t>(heads) * head_dim;
  AttentionInit(nq, head_dim, st.max.data(), st.sum.data(), st.acc.data());
  {
    const void* k = blocks.k(0);
    const void* v = blocks.v(0);
    std::vector<int> first(rows, 5);
    AttentionUpdateBlocks(dtype, q.data(), stride, rows, heads, &k, &v, 1, kBlock, head_dim, first.data(), scale,
                          st.max.data(), st.sum.data(), st.acc.data(), scratch.data());
  }
  std::vector<std::vector<const void*>> k(batch.size()), v(batch.size());
  std::vector<AttentionRun> runs;
  std::vector<int> visible;
  for (size_t i = 0; i < batch.size(); ++i) {
    for (int b : batch[i].blocks) {
      k[i].push_back(blocks.k(b));
      v[i].push_back(blocks.v(b));
    }
    runs.push_back({static_cast<int>(batch[i].visible.size()), k[i].data(), v[i].data(),
                    static_cast<int>(batch[i].blocks.size())});
    visible.insert(visible.end(), batch[i].visible.begin(), batch[i].visible.end());
  }
  if (together) {
    AttentionUpdateRuns(dtype, q.data(), stride, runs.data(), static_cast<int>(runs.size()), heads, kBlock, head_dim,
                        visible.data(), scale, st.max.data(), st.sum.data(), st.acc.data(), scratch.data());
    return st;
  }
  int row = 0;
  for (const AttentionRun& r : runs) {
    const size_t i = static_cast<size_t>(row) * heads;
    AttentionUpdateBlocks(dtype, q.data() + row * stride, stride, r.rows, heads, r.k_blocks, r.v_blocks, r.n_blocks,
                          kBlock, head_dim, visible.data() + row, scale, st.max.data() + i, st.sum.data() + i,
                          st.acc.data() + i * head_dim, scratch.data());
    row += r.rows;
  }
  return st;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Forks of a prompt of `prompt_blocks` blocks (0 .. prompt_blocks - 1),
// decoding: fork f has `own[f]` blocks of its own after the prompt and
// sees `keys[f]` keys.
std::vector<Sequence> Forks(int prompt_blocks, const std::vector<int>& own, const std::vector<int>& keys) {
  std::vector<Sequence> batch;
  int next = prompt_blocks;
  for (size_t f = 0; f < own.size(); ++f) {
    Sequence s;
    for (int b = 0; b < prompt_blocks; ++b) s.blocks.push_back(b);
    for (int b = 0; b < own[f]; ++b) s.blocks.push_back(next++);
    s.visible.push_back(keys[f]);
    batch.push_back(s);
  }
  return batch;
}

class AttentionRunsTest : public KernelIsaTest {};

TEST_P(AttentionRunsTest, ForksDecodingTogetherGetTheBitsOfACallPerFork) {
  ScopedKernelIsa active(GetParam());
  // 8 forks of a 6-block prompt: own blocks partly filled, one fork whose
  // own block holds one key, one with two blocks of its own. Then the same
  // after a 5-block prompt: 80 shared keys, which the AMX value products
  // (chunks of 32 keys of the sequence) do not divide.
  const std::vector<int> own = {1, 1, 1, 2, 1, 1, 1, 1};
  const std::vector<int> past_prompt = {3, 16, 1, kBlock + 9, 8, 12, 5, 7};
  for (int prompt_blocks : {6, 5}) {
    for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16, KvDtype::kQ8_0}) {
      for (int head_dim : {64, 128, 96}) {
        if (!KvDtypeFitsHeadDim(dtype, head_dim)) continue;
        for (int heads : {1, 2, 4}) {
          const Blocks blocks(dtype, head_dim, 16, static_cast<uint32_t>(head_dim + heads));
          std::vector<int> keys;
          for (int k : past_prompt) keys.push_back(prompt_blocks * kBlock + k);
          const std::vector<Sequence> batch = Forks(prompt_blocks, own, keys);
          std::vector<float> q(static_cast<size_t>(batch.size()) * heads * head_dim);
          std::mt19937 rng(7);
          std::normal_distribution<float> nd(0, 1);
          for (float& x : q) x = nd(rng);
          const State together = Attend(dtype, head_dim, heads, blocks, batch, q, true);
          const State alone = Attend(dtype, head_dim, heads, blocks, batch, q, false);
          const std::string what = std::string(KvDtypeName(dtype)) + " head_dim " + std::to_string(head_dim) +
                                   " heads " + std::to_string(heads) + " prompt blocks " +
                                   std::to_string(prompt_blocks);
          EXPECT_TRUE(SameBits(together.max, alone.max)) << what;
          EXPECT_TRUE(SameBits(together.sum, alone.sum)) << what;
          EXPECT_TRUE(SameBits(together.acc, alone.acc)) << what;
        }
      }
    }
  }
}

TEST_P(AttentionRunsTest, MixedBatchesGetTheBitsOfACallPerSequence) {
  ScopedKernelIsa active(GetParam());
  // Forks with a prefill run among them (rows that see the prompt and a
  // causal part of their own), more queries than one tile holds, an
  // unrelated sequence, and a fork that sees only part of the prompt.
  std::vector<Sequence> forks_and_prefill = Forks(4, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
                                                  std::vector<int>(17, 4 * kBlock + 9));
  forks_and_prefill[3].blocks.push_back(forks_and_prefill[3].blocks.back() + 100);  // blocks it does not see yet
  forks_and_prefill[3].visible = {4 * kBlock + 1, 4 * kBlock + 2, 4 * kBlock + 3, 4 * kBlock + 14};
  std::vector<Sequence> with_stranger = Forks(4, {1, 1, 1}, {4 * kBlock + 2, 4 * kBlock + 5, 4 * kBlock + 16});
  with_stranger.insert(with_stranger.begin(), {{50, 51, 52}, {2 * kBlock + 7}});
  with_stranger.push_back({{40, 41, 42, 43, 44, 45}, {5 * kBlock + 11}});
  std::vector<Sequence> partial_prompt = Forks(4, {1, 1, 1}, {4 * kBlock + 2, 2 * kBlock + 5, 4 * kBlock + 16});
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16, KvDtype::kQ8_0}) {
    const int head_dim = 128, heads = 2;
    const Blocks blocks(dtype, head_dim, 200, 11);
    for (const std::vector<Sequence>* batch : {&forks_and_prefill, &with_stranger, &partial_prompt}) {
      int rows = 0;
      for (const Sequence& s : *batch) rows += static_cast<int>(s.visible.size());
      std::vector<float> q(static_cast<size_t>(rows) * heads * head_dim);
      std::mt19937 rng(rows);
      std::normal_distribution<float> nd(0, 1);
      for (float& x : q) x = nd(rng);
      const State together = Attend(dtype, head_dim, heads, blocks, *batch, q, true);
      const State alone = Attend(dtype, head_dim, heads, blocks, *batch, q, false);
      EXPECT_TRUE(SameBits(together.max, alone.max)) << KvDtypeName(dtype) << " rows " << rows;
      EXPECT_TRUE(SameBits(together.sum, alone.sum)) << KvDtypeName(dtype) << " rows " << rows;
      EXPECT_TRUE(SameBits(together.acc, alone.acc)) << KvDtypeName(dtype) << " rows " << rows;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, AttentionRunsTest, ::testing::ValuesIn(AllKernelIsas()),
                         [](const ::testing::TestParamInfo<KernelIsa>& info) {
                           return std::string(KernelIsaName(info.param));
                         });

// Block lists for AttentionSharedBlocks: distinct addresses stand for pages.
struct FakeRuns {
  explicit FakeRuns(const std::vector<std::vector<int>>& pages) : k(pages.size()), v(pages.size()) {
    for (size_t i = 0; i < pages.size(); ++i) {
      for (int p : pages[i]) {
        k[i].push_back(&storage[2 * p]);
        v[i].push_back(&storage[2 * p + 1]);
      }
      runs.push_back({1, k[i].data(), v[i].data(), static_cast<int>(pages[i].size())});
    }
  }
  char storage[64] = {};
  std::vector<std::vector<const void*>> k, v;
  std::vector<AttentionRun> runs;
};

TEST(AttentionSharedBlocksTest, CountsTheLeadingPagesEveryRunHasAndEveryRowSeesWhole) {
  FakeRuns forks({{0, 1, 2, 3, 10}, {0, 1, 2, 3, 11}, {0, 1, 2, 3, 12}});
  const int past_prompt[] = {4 * kBlock + 1, 4 * kBlock + 5, 4 * kBlock + 16};
  EXPECT_EQ(AttentionSharedBlocks(forks.runs.data(), 3, kBlock, past_prompt), 4);
  // A row that sees the prompt's last key and nothing after keeps the last
  // prompt page out of the shared tile (each row has keys of its own after).
  const int at_prompt_end[] = {4 * kBlock, 4 * kBlock + 5, 4 * kBlock + 16};
  EXPECT_EQ(AttentionSharedBlocks(forks.runs.data(), 3, kBlock, at_prompt_end), 3);
  const int inside_prompt[] = {2 * kBlock + 3, 4 * kBlock + 5, 4 * kBlock + 16};
  EXPECT_EQ(AttentionSharedBlocks(forks.runs.data(), 3, kBlock, inside_prompt), 2);
  // Runs that diverge at page 2 (a copy-on-write page) share 2.
  FakeRuns diverged({{0, 1, 2, 3}, {0, 1, 5, 3}});
  const int two[] = {4 * kBlock, 4 * kBlock};
  EXPECT_EQ(AttentionSharedBlocks(diverged.runs.data(), 2, kBlock, two), 2);
  // Unrelated sequences, and a single run, share nothing.
  FakeRuns strangers({{0, 1}, {2, 3}});
  EXPECT_EQ(AttentionSharedBlocks(strangers.runs.data(), 2, kBlock, two), 0);
  EXPECT_EQ(AttentionSharedBlocks(forks.runs.data(), 1, kBlock, past_prompt), 0);
}

}  // namespace
}  // namespace kvs
