// MergeQueue against the binary heap it replaces: for every sequence of
// pushes and pops, the same (key, left) comes out of both, whichever way
// the items arrive (in position order, with a few out of order, at
// random), across the move from the small heap to the buckets.
#include "model/merge_queue.h"

#include <cstdint>
#include <queue>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace kvs {
namespace {

struct Item {
  int32_t key;
  int32_t left;
  int32_t payload;  // which push it was
};

struct HeapOrder {
  bool operator()(const Item& a, const Item& b) const {
    return a.key > b.key || (a.key == b.key && a.left > b.left);
  }
};

// Pushes and pops the same items on a MergeQueue and a std::priority_queue
// and checks that what comes out of both is the same (key, left).
class Twin {
 public:
  void Push(int32_t key, int32_t left) {
    const Item item{key, left, pushes_++};
    queue_.Push(item);
    reference_.push(item);
  }
  // Pops both; false (and a message) if they differ.
  ::testing::AssertionResult Pop() {
    if (queue_.empty() != reference_.empty()) {
      return ::testing::AssertionFailure() << "empty() differs after " << pops_ << " pops";
    }
    const Item got = queue_.Pop();
    const Item want = reference_.top();
    reference_.pop();
    ++pops_;
    if (got.key != want.key || got.left != want.left) {
      return ::testing::AssertionFailure()
             << "pop " << pops_ << ": got (" << got.key << ", " << got.left << "), want ("
             << want.key << ", " << want.left << ")";
    }
    return ::testing::AssertionSuccess();
  }
  ::testing::AssertionResult Drain() {
    while (!reference_.empty()) {
      if (::testing::AssertionResult r = Pop(); !r) return r;
    }
    if (!queue_.empty()) return ::testing::AssertionFailure() << "the queue has items left";
    return ::testing::AssertionSuccess();
  }
  bool empty() const { return reference_.empty(); }

 private:
  MergeQueue<Item> queue_;
  std::priority_queue<Item, std::vector<Item>, HeapOrder> reference_;
  int32_t pushes_ = 0;
  int pops_ = 0;
};

TEST(MergeQueue, PopsTheLowestKeyThenTheLeftmostLikeAHeapForAShortPiece) {
  Twin q;
  for (auto [key, left] : std::vector<std::pair<int, int>>{{5, 3}, {2, 7}, {5, 1}, {2, 0}, {9, 4}}) {
    q.Push(key, left);
  }
  EXPECT_TRUE(q.Drain());
}

// A run of one symbol: every candidate has one key and arrives left to
// right, and each pop queues the next round's candidate to its right.
TEST(MergeQueue, PopsARunsRoundsInPositionOrderLikeAHeap) {
  Twin q;
  const int n = 10000;
  for (int i = 0; i < n; ++i) q.Push(/*key=*/7, i);
  for (int i = 0; i < n / 2; ++i) {
    ASSERT_TRUE(q.Pop());
    q.Push(/*key=*/3 + (i % 3 == 0), 2 * i);  // the next round, better keys
  }
  EXPECT_TRUE(q.Drain());
}

// Items that arrive left of the last one of their key (the case a
// SentencePiece run meets) go to the bucket's heap and still come out in
// position order.
TEST(MergeQueue, PopsItemsPushedOutOfPositionOrderInPositionOrder) {
  Twin q;
  for (int i = 0; i < 1000; ++i) q.Push(1, 10 * i);
  q.Push(1, 5);     // behind the last, ahead of the head
  q.Push(1, 2);
  q.Push(1, 9985);  // between two queued ones
  for (int i = 0; i < 500; ++i) {
    ASSERT_TRUE(q.Pop());
    if (i % 7 == 0) q.Push(1, 10 * i + 3);  // out of order, ahead of the head
    if (i % 11 == 0) q.Push(0, 20000 - i);  // another key, right to left
  }
  EXPECT_TRUE(q.Drain());
}

TEST(MergeQueue, PopsWhatAHeapPopsForRandomPushesAndPops) {
  std::mt19937 rng(20261202);
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE(round);
    Twin q;
    const int keys = 1 + static_cast<int>(rng() % 40);
    const int positions = 1 + static_cast<int>(rng() % 5000);
    const int ops = static_cast<int>(rng() % 3000);
    const bool mostly_ordered = rng() % 2 == 0;
    int next_left = 0;
    for (int op = 0; op < ops; ++op) {
      if (!q.empty() && rng() % 3 == 0) {
        ASSERT_TRUE(q.Pop());
        continue;
      }
      int32_t left;
      if (mostly_ordered && rng() % 20 != 0) {
        left = next_left++ % positions;
      } else {
        left = static_cast<int32_t>(rng() % static_cast<uint32_t>(positions));
      }
      q.Push(static_cast<int32_t>(rng() % static_cast<uint32_t>(keys)), left);
    }
    ASSERT_TRUE(q.Drain());
  }
}

TEST(MergeQueue, IsEmptyOnlyWhenEveryPushedItemWasPopped) {
  MergeQueue<Item> q;
  EXPECT_TRUE(q.empty());
  for (int i = 0; i < 200; ++i) q.Push({i % 3, 200 - i, i});  // past the small heap
  for (int i = 0; i < 200; ++i) {
    ASSERT_FALSE(q.empty()) << i;
    q.Pop();
  }
  EXPECT_TRUE(q.empty());
  q.Push({4, 1, 0});  // used again after emptying
  EXPECT_FALSE(q.empty());
  EXPECT_EQ(q.Pop().left, 1);
  EXPECT_TRUE(q.empty());
}

// Rounds of a run, as the merge loops make them: each pop of one key's
// round queues a candidate of the next key for every other position. The
// FIFO blocks held stay near the largest round (the first), not the sum
// of all rounds (about twice that), because each round reuses the blocks
// the last one emptied.
TEST(MergeQueue, ARunsRoundsReuseTheBlocksOfTheRoundsBeforeThem) {
  constexpr int32_t kRun = 20'000;
  MergeQueue<Item> queue;
  int32_t pushes = 0;
  for (int32_t left = 0; left < kRun; ++left) {
    queue.Push({0, left, pushes++});
  }
  while (!queue.empty()) {
    const Item item = queue.Pop();
    // Round r holds the positions that are multiples of 2^r.
    const int32_t next = item.key + 1;
    if (next < 14 && item.left % (1 << next) == 0) queue.Push({next, item.left, pushes++});
  }
  EXPECT_GT(pushes, kRun * 19 / 10);
  const size_t first_round_blocks = kRun / BlockFifos<Item>::kItemsPerBlock;
  EXPECT_LE(queue.fifo_blocks_allocated(), first_round_blocks + 2)
      << "the later rounds did not reuse the first round's blocks (" << pushes << " pushes)";
}

}  // namespace
}  // namespace kvs
