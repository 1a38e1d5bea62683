// BlockFifos: each queue pops what it was pushed, in order, across block
// boundaries, while other queues share the pool; a block a queue has
// emptied is what the next push of any queue reuses.
#include "model/block_fifos.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace kvs {
namespace {

struct Item {
  int32_t value;
};

using Fifos = BlockFifos<Item, 4>;

// Phases of mostly pushes and mostly pops, so each queue fills past
// several blocks, drains to empty and refills, often stopping part-way
// through a block.
TEST(BlockFifos, EachQueuePopsItsItemsInOrderAcrossBlocksWhileOthersShareThePool) {
  Fifos fifos;
  std::vector<Fifos::Fifo> queues(5);
  std::vector<std::deque<int32_t>> reference(queues.size());
  std::mt19937 rng(7);
  size_t most_waiting = 0;
  int emptied = 0;
  for (int step = 0; step < 40000; ++step) {
    const bool filling = (step / 500) % 2 == 0;
    const size_t q = rng() % queues.size();
    const bool push = reference[q].empty() || (filling ? rng() % 4 != 0 : rng() % 4 == 0);
    if (push) {
      fifos.push_back(queues[q], Item{step});
      reference[q].push_back(step);
    } else {
      ASSERT_FALSE(Fifos::empty(queues[q]));
      ASSERT_EQ(fifos.front(queues[q]).value, reference[q].front()) << "step " << step;
      fifos.pop_front(queues[q]);
      reference[q].pop_front();
      emptied += reference[q].empty();
    }
    ASSERT_EQ(Fifos::empty(queues[q]), reference[q].empty()) << "step " << step;
    if (!reference[q].empty()) {
      ASSERT_EQ(fifos.back(queues[q]).value, reference[q].back()) << "step " << step;
    }
    size_t waiting = 0;
    for (const auto& r : reference) waiting += r.size();
    most_waiting = std::max(most_waiting, waiting);
  }
  EXPECT_GT(emptied, 20) << "the queues should empty and refill";
  EXPECT_GT(most_waiting, 40u) << "the queues should span several blocks";
  // At most the items waiting at once in blocks, plus a part-used block
  // at each end of each queue.
  EXPECT_LE(fifos.blocks_allocated(), most_waiting / 4 + 2 * queues.size());
  for (size_t q = 0; q < queues.size(); ++q) {
    while (!reference[q].empty()) {
      ASSERT_EQ(fifos.front(queues[q]).value, reference[q].front());
      fifos.pop_front(queues[q]);
      reference[q].pop_front();
    }
    EXPECT_TRUE(Fifos::empty(queues[q]));
  }
}

TEST(BlockFifos, AMovedFifoKeepsItsItemsAndLeavesItsSourceEmpty) {
  Fifos fifos;
  Fifos::Fifo a;
  for (int32_t i = 0; i < 10; ++i) fifos.push_back(a, Item{i});
  Fifos::Fifo b = std::move(a);
  EXPECT_TRUE(Fifos::empty(a));  // NOLINT(bugprone-use-after-move): the contract says so
  for (int32_t i = 0; i < 10; ++i) {
    ASSERT_FALSE(Fifos::empty(b));
    EXPECT_EQ(fifos.front(b).value, i);
    fifos.pop_front(b);
  }
  EXPECT_TRUE(Fifos::empty(b));
}

// One queue drains while the next fills, as a run's rounds of merges do:
// the pool holds about what waits at once, not every item ever pushed.
TEST(BlockFifos, AQueueFillingWhileAnotherDrainsReusesItsBlocks) {
  Fifos fifos;
  Fifos::Fifo draining;
  Fifos::Fifo filling;
  for (int32_t i = 0; i < 400; ++i) fifos.push_back(draining, Item{i});
  const size_t held = fifos.blocks_allocated();
  EXPECT_EQ(held, 100u);
  for (int round = 0; round < 10; ++round) {
    for (int32_t i = 0; i < 400; ++i) {
      EXPECT_EQ(fifos.front(draining).value, i);
      fifos.pop_front(draining);
      fifos.push_back(filling, Item{i});
    }
    EXPECT_TRUE(Fifos::empty(draining));
    std::swap(draining, filling);
  }
  EXPECT_LE(fifos.blocks_allocated(), held + 1) << "the emptied blocks were not reused";
}

}  // namespace
}  // namespace kvs
