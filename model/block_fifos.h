// BlockFifos: many FIFO queues of one item type that share one pool of
// fixed-size blocks. A queue is a `Fifo` handle (four integers, no
// allocation until its first push); its items live in a chain of blocks
// of kBlockItems each. A block that its queue has popped empty goes back
// to the pool's free list, and the next push of any queue that needs a
// block takes it from there. So the memory held is the items waiting
// (rounded up to blocks), not every item ever pushed, and no queue is
// ever copied as it grows: what MergeQueue needs when a megabyte of one
// symbol drains one key's queue while it fills the next key's.
//
//   blocks_  every block the pool has allocated (owned; never freed
//            before the pool is destroyed)
//   free_    the blocks no queue holds
//   Fifo     first/last: the chain's blocks (null: empty queue); head:
//            the next item to pop in `first`; tail: the items in `last`
//
// Requires: Item is trivially copyable. front/back/pop_front require a
// non-empty queue. A Fifo must only be used with the pool that filled it,
// and is left empty when its last item is popped. Not thread-safe.
#ifndef KVSESSION_MODEL_BLOCK_FIFOS_H_
#define KVSESSION_MODEL_BLOCK_FIFOS_H_

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

namespace kvs {

template <class Item, int32_t kBlockItems = 32>
class BlockFifos {
  static_assert(std::is_trivially_copyable_v<Item>);
  static_assert(kBlockItems > 0);
  struct Block;

 public:
  struct Fifo {
    Block* first = nullptr;
    Block* last = nullptr;
    int32_t head = 0;
    int32_t tail = 0;
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
        fifo = Fifo{};
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
