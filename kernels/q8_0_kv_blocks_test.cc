// Q8_0 KV blocks (q8_0_kv_blocks.h): keys are packed_q8_0.h's groups
// (checked against PackQ8_0 itself), values hold their scales apart from
// rows of quants, every conversion gives back the exact row bytes, and a
// block keeps the size of its rows.
#include "kernels/q8_0_kv_blocks.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/packed_q8_0.h"
#include "kernels/test_weights.h"

namespace kvs {
namespace {

size_t RowBytes(int head_dim) { return static_cast<size_t>(head_dim / 32) * 34; }

std::vector<uint8_t> RandomRows(int n, int head_dim, uint32_t seed) {
  std::mt19937 rng(seed);
  return RandomWeights(GgmlType::kQ8_0, n, head_dim, rng);
}

// A block of `bytes` followed by guard bytes that no conversion may touch.
constexpr size_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xA5;
std::vector<uint8_t> GuardedBlock(size_t bytes) { return std::vector<uint8_t>(bytes + kGuard, kGuardByte); }
bool GuardIntact(const std::vector<uint8_t>& block) {
  return std::all_of(block.end() - kGuard, block.end(), [](uint8_t b) { return b == kGuardByte; });
}

TEST(Q8_0KvBlocksTest, AKeyBlockOfAnEvenBlockCountIsPackQ8_0sGroupsByteForByte) {
  for (int head_dim : {64, 128, 256}) {
    for (int tokens : {16, 32}) {
      SCOPED_TRACE(testing::Message() << "head_dim " << head_dim << ", " << tokens << " slots");
      const std::vector<uint8_t> rows = RandomRows(tokens, head_dim, 7 + head_dim + tokens);
      std::vector<uint8_t> block = GuardedBlock(tokens * RowBytes(head_dim));
      Q8_0KeyBlockFromRows(rows.data(), tokens, head_dim, block.data());
      std::vector<uint8_t> packed(PackedQ8_0Bytes(tokens, head_dim));
      ASSERT_EQ(packed.size(), tokens * RowBytes(head_dim));
      PackQ8_0(rows.data(), RowBytes(head_dim), tokens, head_dim, packed.data());
      EXPECT_TRUE(std::equal(packed.begin(), packed.end(), block.begin()));
      EXPECT_TRUE(GuardIntact(block));
    }
  }
}

TEST(Q8_0KvBlocksTest, AnOddBlockCountsKeyGroupIsPackQ8_0sWithoutItsScalesPadding) {
  for (int head_dim : {32, 96, 160}) {
    SCOPED_TRACE(testing::Message() << "head_dim " << head_dim);
    const int nb = head_dim / 32;
    const std::vector<uint8_t> rows = RandomRows(16, head_dim, 11 + head_dim);
    std::vector<uint8_t> block = GuardedBlock(16 * RowBytes(head_dim));
    Q8_0KeyBlockFromRows(rows.data(), 16, head_dim, block.data());
    std::vector<uint8_t> packed(PackedQ8_0GroupBytes(head_dim));
    PackQ8_0(rows.data(), RowBytes(head_dim), 16, head_dim, packed.data());
    const size_t scales = static_cast<size_t>(nb) * 32, padded = packed.size() - static_cast<size_t>(nb) * 512;
    ASSERT_GT(padded, scales);  // packed_q8_0.h pads them to 64 bytes
    EXPECT_EQ(Q8_0KeyGroupQuantsOffset(head_dim), scales);
    EXPECT_EQ(0, std::memcmp(block.data(), packed.data(), scales));
    EXPECT_EQ(0, std::memcmp(block.data() + scales, packed.data() + padded, static_cast<size_t>(nb) * 512));
    EXPECT_TRUE(GuardIntact(block));
  }
}

TEST(Q8_0KvBlocksTest, AValueBlockHoldsEverySlotsScalesFirstThenItsQuantsAsRows) {
  constexpr int kHeadDim = 96, kTokens = 32, kNb = kHeadDim / 32;
  const std::vector<uint8_t> rows = RandomRows(kTokens, kHeadDim, 3);
  std::vector<uint8_t> block = GuardedBlock(kTokens * RowBytes(kHeadDim));
  Q8_0ValueBlockFromRows(rows.data(), kTokens, kHeadDim, kTokens, block.data());
  ASSERT_EQ(Q8_0ValueQuantsOffset(kHeadDim, kTokens), static_cast<size_t>(kTokens) * kNb * 2);
  for (int s = 0; s < kTokens; ++s) {
    for (int b = 0; b < kNb; ++b) {
      const uint8_t* row_block = rows.data() + s * RowBytes(kHeadDim) + b * 34;
      EXPECT_EQ(0, std::memcmp(block.data() + (b * kTokens + s) * 2, row_block, 2)) << "slot " << s << " block " << b;
      EXPECT_EQ(0, std::memcmp(block.data() + kTokens * kNb * 2 + s * kHeadDim + b * 32, row_block + 2, 32))
          << "slot " << s << " block " << b;
      // Where the kernels find them.
      EXPECT_EQ(Q8_0ValueScales(block.data(), kTokens, b) + s * 2, block.data() + (b * kTokens + s) * 2);
      EXPECT_EQ(0, std::memcmp(Q8_0ValueQuants(block.data(), kHeadDim, kTokens, s) + b * 32, row_block + 2, 32))
          << "slot " << s << " block " << b;
    }
  }
  EXPECT_TRUE(GuardIntact(block));
}

TEST(Q8_0KvBlocksTest, RowsComeBackExactlyFromKeyAndValueBlocksWholeOrPartial) {
  for (int head_dim : {32, 96, 128}) {
    for (int tokens : {16, 32}) {
      for (int n_slots : {1, 15, tokens}) {
        SCOPED_TRACE(testing::Message() << "head_dim " << head_dim << ", " << n_slots << " of " << tokens);
        const std::vector<uint8_t> rows = RandomRows(n_slots, head_dim, head_dim * 100 + tokens + n_slots);
        std::vector<uint8_t> keys = GuardedBlock(tokens * RowBytes(head_dim));
        std::vector<uint8_t> values = GuardedBlock(tokens * RowBytes(head_dim));
        Q8_0KeyBlockFromRows(rows.data(), n_slots, head_dim, keys.data());
        Q8_0ValueBlockFromRows(rows.data(), n_slots, head_dim, tokens, values.data());
        std::vector<uint8_t> from_keys(rows.size()), from_values(rows.size());
        Q8_0KeyBlockToRows(keys.data(), n_slots, head_dim, from_keys.data());
        Q8_0ValueBlockToRows(values.data(), n_slots, head_dim, tokens, from_values.data());
        EXPECT_EQ(from_keys, rows);
        EXPECT_EQ(from_values, rows);
        EXPECT_TRUE(GuardIntact(keys));
        EXPECT_TRUE(GuardIntact(values));
      }
    }
  }
}

TEST(Q8_0KvBlocksTest, StoringOneSlotChangesThatSlotOnly) {
  constexpr int kHeadDim = 128, kTokens = 32;
  const std::vector<uint8_t> rows = RandomRows(kTokens, kHeadDim, 5);
  const std::vector<uint8_t> other = RandomRows(1, kHeadDim, 6);
  std::vector<uint8_t> keys(kTokens * RowBytes(kHeadDim)), values(keys.size());
  Q8_0KeyBlockFromRows(rows.data(), kTokens, kHeadDim, keys.data());
  Q8_0ValueBlockFromRows(rows.data(), kTokens, kHeadDim, kTokens, values.data());
  constexpr int kSlot = 21;  // the second key group's lane 5
  StoreQ8_0KeySlot(other.data(), kHeadDim, kSlot, keys.data());
  StoreQ8_0ValueSlot(other.data(), kHeadDim, kTokens, kSlot, values.data());
  std::vector<uint8_t> row(RowBytes(kHeadDim));
  for (int s = 0; s < kTokens; ++s) {
    const uint8_t* expected = s == kSlot ? other.data() : rows.data() + s * RowBytes(kHeadDim);
    LoadQ8_0KeySlot(keys.data(), kHeadDim, s, row.data());
    EXPECT_EQ(0, std::memcmp(row.data(), expected, row.size())) << "key slot " << s;
    LoadQ8_0ValueSlot(values.data(), kHeadDim, kTokens, s, row.data());
    EXPECT_EQ(0, std::memcmp(row.data(), expected, row.size())) << "value slot " << s;
  }
}

TEST(Q8_0KvBlocksTest, SlotsStoredInAnyOrderMakeTheSameBlockAsTheRowsTogether) {
  constexpr int kHeadDim = 64, kTokens = 16;
  const std::vector<uint8_t> rows = RandomRows(kTokens, kHeadDim, 9);
  std::vector<uint8_t> keys(kTokens * RowBytes(kHeadDim)), values(keys.size());
  Q8_0KeyBlockFromRows(rows.data(), kTokens, kHeadDim, keys.data());
  Q8_0ValueBlockFromRows(rows.data(), kTokens, kHeadDim, kTokens, values.data());
  std::vector<int> order(kTokens);
  for (int s = 0; s < kTokens; ++s) order[s] = s;
  std::shuffle(order.begin(), order.end(), std::mt19937(1));
  std::vector<uint8_t> keys_by_slot(keys.size(), 0x5A), values_by_slot(values.size(), 0x5A);
  for (int s : order) {
    StoreQ8_0KeySlot(rows.data() + s * RowBytes(kHeadDim), kHeadDim, s, keys_by_slot.data());
    StoreQ8_0ValueSlot(rows.data() + s * RowBytes(kHeadDim), kHeadDim, kTokens, s, values_by_slot.data());
  }
  EXPECT_EQ(keys_by_slot, keys);
  EXPECT_EQ(values_by_slot, values);
}

}  // namespace
}  // namespace kvs
