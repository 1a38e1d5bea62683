// GroupRowsByKey (decode_row_order.h): rows with one key end up
// consecutive, groups in the order of their first row, each group's rows
// in their own order.
#include "service/decode_row_order.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kvs {
namespace {

struct Row {
  int key;
  std::string name;
};

std::vector<std::string> Grouped(std::vector<Row> rows) {
  GroupRowsByKey(std::span<Row>(rows), [](const Row& r) { return r.key; });
  std::vector<std::string> names;
  for (const Row& r : rows) names.push_back(r.name);
  return names;
}

TEST(DecodeRowOrderTest, InterleavedForksOfTwoPromptsBecomeTwoRunsInFirstSeenOrder) {
  EXPECT_EQ(Grouped({{7, "a1"}, {3, "b1"}, {7, "a2"}, {3, "b2"}, {7, "a3"}, {3, "b3"}}),
            (std::vector<std::string>{"a1", "a2", "a3", "b1", "b2", "b3"}));
}

TEST(DecodeRowOrderTest, StrangersKeepTheirPlacesRelativeToTheGroups) {
  EXPECT_EQ(Grouped({{1, "s"}, {5, "f1"}, {2, "t"}, {5, "f2"}, {4, "u"}, {5, "f3"}}),
            (std::vector<std::string>{"s", "f1", "f2", "f3", "t", "u"}));
}

TEST(DecodeRowOrderTest, AnAlreadyGroupedBatchIsLeftAsItIs) {
  const std::vector<Row> rows = {{5, "f1"}, {5, "f2"}, {1, "s"}, {9, "g1"}, {9, "g2"}, {9, "g3"}};
  EXPECT_EQ(Grouped(rows), (std::vector<std::string>{"f1", "f2", "s", "g1", "g2", "g3"}));
}

TEST(DecodeRowOrderTest, EmptyAndSingleRowBatchesAreFine) {
  EXPECT_TRUE(Grouped({}).empty());
  EXPECT_EQ(Grouped({{1, "only"}}), (std::vector<std::string>{"only"}));
}

TEST(DecodeRowOrderTest, EveryRowIsKeptAndEachKeyFormsOneRunForAnyInterleaving) {
  // 128 rows (the engine's most) of 5 keys in a scrambled order.
  std::vector<Row> rows;
  for (int i = 0; i < 128; ++i) rows.push_back({(i * 7 + i / 3) % 5, std::to_string(i)});
  std::vector<Row> grouped = rows;
  GroupRowsByKey(std::span<Row>(grouped), [](const Row& r) { return r.key; });
  ASSERT_EQ(grouped.size(), rows.size());
  int runs = 0;
  for (size_t i = 0; i < grouped.size(); ++i) runs += i == 0 || grouped[i].key != grouped[i - 1].key;
  EXPECT_EQ(runs, 5);
  // Within a key, the original order.
  for (int k = 0; k < 5; ++k) {
    std::vector<std::string> before, after;
    for (const Row& r : rows) if (r.key == k) before.push_back(r.name);
    for (const Row& r : grouped) if (r.key == k) after.push_back(r.name);
    EXPECT_EQ(before, after) << "key " << k;
  }
}

}  // namespace
}  // namespace kvs
