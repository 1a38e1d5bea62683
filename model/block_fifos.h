// BlockFifos: many FIFO queues of one item type that share one pool of
// fixed-size blocks. A queue is a `Fifo` handle (two block pointers and
// two indices; no allocation until its first push); its items live in a
// chain of blocks of kItemsPerBlock each. A block that its queue has
// popped empty goes back to the pool's free list, and the next push of
// any queue that needs a block takes it from there. So the pool holds the
// most blocks in use at one time (at least one per non-empty queue, and
// the items waiting rounded up to blocks), not every item ever pushed,
// and no queue is ever copied as it grows: what MergeQueue needs when a
// megabyte of one symbol drains one key's queue while it fills the next
// key's. Blocks are small (8 items) because a long piece may hold many
// short queues at once, one per key.
//
//   blocks_  every block the pool has allocated (owned; never freed
//            before the pool is destroyed)
//   free_    the blocks no queue holds
//   Fifo     first/last: the chain's blocks (null: empty queue); head:
//            the next item to pop in `first`; tail: the items in `last`
//
// Ownership: the pool owns every block; a Fifo only points into it, must
// only be used with the pool that filled it, and must not outlive it.
// Fifo is move-only (a copy popped on its own would free blocks the other
// still uses); a moved-from Fifo is empty. A non-empty Fifo that is
// dropped keeps its blocks until the pool is destroyed.
// Requires: Item is trivially copyable and default-constructible.
// front/back/pop_front require a non-empty queue; a queue is empty again
// once its last item is popped. Not thread-safe.
#ifndef KVSESSION_MODEL_BLOCK_FIFOS_H_
#define KVSESSION_MODEL_BLOCK_FIFOS_H_

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace kvs {

template <class Item, int32_t kBlockItems = 8>
class BlockFifos {
  static_assert(std::is_trivially_copyable_v<Item>);
  static_assert(std::is_default_constructible_v<Item>);
  static_assert(kBlockItems > 0);
  struct Block;

 public:
  static constexpr int32_t kItemsPerBlock = kBlockItems;

  class Fifo {
   public:
    Fifo() = default;
    Fifo(Fifo&& other) noexcept { *this = std::move(other); }
    Fifo& operator=(Fifo&& other) noexcept {
      first = std::exchange(other.first, nullptr);
      last = std::exchange(other.last, nullptr);
      head = std::exchange(other.head, 0);
      tail = std::exchange(other.tail, 0);
      return *this;
    }
    Fifo(const Fifo&) = delete;
    Fifo& operator=(const Fifo&) = delete;

   private:
    friend class BlockFifos;
    Block* first = nullptr;  // null: the queue is empty
    Block* last = nullptr;
    int32_t head = 0;  // the next item to pop, in `first`
    int32_t tail = 0;  // the items in `last`
  };

  static bool empty(const Fifo& fifo) { return fifo.first == nullptr; }
  static const Item& front(const Fifo& fifo) { return fifo.first->items[fifo.head]; }
  static const Item& back(const Fifo& fifo) { return fifo.last->items[fifo.tail - 1]; }

  void push_back(Fifo& fifo, const Item& item) {
    if (fifo.last == nullptr || fifo.tail == kBlockItems) {
      Block* block = TakeBlock();
      if (fifo.last == nullptr) {
        fifo.first = block;
        fifo.head = 0;
      } else {
        fifo.last->next = block;
      }
      fifo.last = block;
      fifo.tail = 0;
    }
    fifo.last->items[fifo.tail++] = item;
  }

  void pop_front(Fifo& fifo) {
    ++fifo.head;
    if (fifo.first == fifo.last) {
      if (fifo.head == fifo.tail) {  // the last item: the queue is empty
        free_.push_back(fifo.first);
        fifo = Fifo();
      }
    } else if (fifo.head == kBlockItems) {  // the first block is done
      Block* next = fifo.first->next;
      free_.push_back(fifo.first);
      fifo.first = next;
      fifo.head = 0;
    }
  }

  // Blocks allocated so far (held by queues or free): for tests.
  size_t blocks_allocated() const { return blocks_.size(); }

 private:
  struct Block {
    Item items[kBlockItems];
    Block* next;  // the chain's next block; meaningful unless last
  };

  Block* TakeBlock() {
    if (!free_.empty()) {
      Block* block = free_.back();
      free_.pop_back();
      return block;
    }
    blocks_.push_back(std::unique_ptr<Block>(new Block));  // items left uninitialized
    return blocks_.back().get();
  }

  std::vector<std::unique_ptr<Block>> blocks_;
  std::vector<Block*> free_;
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_BLOCK_FIFOS_H_
