// BlockFifos: each queue pops what it was pushed, in order, across block
// boundaries, while other queues share the pool; a block a queue has
// emptied is what the next push of any queue reuses.
#include "model/block_fifos.h"

#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace kvs {
namespace {

struct Item {
  int32_t value;
};

using Fifos = BlockFifos<Item, 4>;

TEST(BlockFifos, EachQueuePopsItsItemsInOrderAcrossBlocksWhileOthersShareThePool) {
  Fifos fifos;
  std::vector<Fifos::Fifo> queues(5);
  std::vector<std::deque<int32_t>> reference(queues.size());
  std::mt19937 rng(7);
  for (int step = 0; step < 20000; ++step) {
    const size_t q = rng() % queues.size();
    if (rng() % 3 != 0 || reference[q].empty()) {
      fifos.push_back(queues[q], Item{step});
      reference[q].push_back(step);
    } else {
      ASSERT_FALSE(Fifos::empty(queues[q]));
      ASSERT_EQ(fifos.front(queues[q]).value, reference[q].front()) << "step " << step;
      fifos.pop_front(queues[q]);
      reference[q].pop_front();
    }
    ASSERT_EQ(Fifos::empty(queues[q]), reference[q].empty()) << "step " << step;
    if (!reference[q].empty()) {
      ASSERT_EQ(fifos.back(queues[q]).value, reference[q].back()) << "step " << step;
    }
  }
  for (size_t q = 0; q < queues.size(); ++q) {
    while (!reference[q].empty()) {
      ASSERT_EQ(fifos.front(queues[q]).value, reference[q].front());
      fifos.pop_front(queues[q]);
      reference[q].pop_front();
    }
    EXPECT_TRUE(Fifos::empty(queues[q]));
  }
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
