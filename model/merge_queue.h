// MergeQueue: the pending merges of one piece of text being tokenized,
// popped in the order of a min-heap on (key, left): the best merge first
// (lowest key: a BPE merge's rank, a SentencePiece token's score rank),
// leftmost first among equal keys. It pops what std::priority_queue with
// that order pops, up to the order of items with equal key and equal left
// (which the merge loops treat alike: at most one of them is still current).
//
// Why not a plain binary heap: a long run of one symbol (a hostile
// megabyte of spaces or newlines) queues one candidate per position, all
// with the same key, and a heap then sifts each pop through a tree larger
// than the caches (about 20 cache misses a pop at a million candidates).
// Here each key has its own bucket: a FIFO of the items that arrive in
// position order (as they do along a run: the first scan queues left to
// right, and so does each round of merges), and a small heap on `left`
// of those that arrive out of order; a pop takes the leftmost of the two
// heads. A min-heap of keys picks the bucket. So a long run costs a
// sequential sweep per round of merges.
//
//   small_          the items, a plain heap, until more than
//                   kBucketAfter wait at once (a short piece never gets
//                   further); then all move to buckets for good
//   buckets_        one per key seen in this piece: `fifo` (a queue of
//                   fifos_), `late` (the heap)
//   fifos_          the FIFOs' items, in blocks that a drained FIFO gives
//                   back for any other to reuse (model/block_fifos.h)
//   bucket_of_key_  key -> index into buckets_
//   keys_           min-heap of the keys whose bucket is not empty
//
// Item: any struct with `int32_t key` and `int32_t left` members.
// Cost: a push is a hash lookup plus a FIFO append (a heap push if out
// of order, and a key-heap push when its bucket was empty); a pop from a
// FIFO is O(1), plus a key-heap pop when the bucket empties. Memory: the
// most FIFO blocks in use at once (the items waiting, rounded up to
// blocks of 8 per key), so a run's later rounds refill the blocks its
// earlier rounds emptied (a vector per FIFO instead grew to every item
// ever pushed: tens of MiB for a megabyte of spaces, copied on each
// growth and faulted in afresh by every call). Not thread-safe (one per
// piece).
#ifndef KVSESSION_MODEL_MERGE_QUEUE_H_
#define KVSESSION_MODEL_MERGE_QUEUE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "model/block_fifos.h"

namespace kvs {

template <class Item>
class MergeQueue {
 public:
  // Up to this many waiting items stay in one plain heap (a word of prose
  // queues a handful); a push past it moves them all into buckets.
  static constexpr size_t kBucketAfter = 64;

  bool empty() const { return bucketed_ ? keys_.empty() : small_.empty(); }

  void Push(const Item& item) {
    if (!bucketed_) {
      if (small_.size() < kBucketAfter) {
        small_.push_back(item);
        std::push_heap(small_.begin(), small_.end(), Worse);
        return;
      }
      MoveToBuckets();
    }
    PushToBucket(item);
  }

  // Blocks the FIFOs have allocated so far: what the buckets held at
  // most at one time (for tests).
  size_t fifo_blocks_allocated() const { return fifos_.blocks_allocated(); }

  // The least (key, left). Requires !empty().
  Item Pop() {
    if (!bucketed_) {
      std::pop_heap(small_.begin(), small_.end(), Worse);
      const Item item = small_.back();
      small_.pop_back();
      return item;
    }
    const int32_t key = keys_.front();
    Bucket& b = buckets_[static_cast<size_t>(bucket_of_key_.find(key)->second)];
    Item item;
    if (!b.late.empty() &&
        (BlockFifos<Item>::empty(b.fifo) || b.late.front().left < fifos_.front(b.fifo).left)) {
      std::pop_heap(b.late.begin(), b.late.end(), RightOf);
      item = b.late.back();
      b.late.pop_back();
    } else {
      item = fifos_.front(b.fifo);
      fifos_.pop_front(b.fifo);
    }
    if (b.empty()) {
      std::pop_heap(keys_.begin(), keys_.end(), std::greater<int32_t>());
      keys_.pop_back();
    }
    return item;
  }

 private:
  struct Bucket {
    typename BlockFifos<Item>::Fifo fifo;  // in position order
    std::vector<Item> late;                 // a heap on left: pushed out of position order
    bool empty() const { return BlockFifos<Item>::empty(fifo) && late.empty(); }
  };
  // Heap order "a below b": the least (key, left) on top.
  struct WorseOrder {
    bool operator()(const Item& a, const Item& b) const {
      return a.key > b.key || (a.key == b.key && a.left > b.left);
    }
  };
  // Heap order within a bucket: the leftmost on top.
  struct RightOfOrder {
    bool operator()(const Item& a, const Item& b) const { return a.left > b.left; }
  };
  static constexpr WorseOrder Worse{};
  static constexpr RightOfOrder RightOf{};

  void MoveToBuckets() {
    // In (key, left) order, so each bucket's items go to its FIFO.
    std::sort(small_.begin(), small_.end(), [](const Item& a, const Item& b) { return Worse(b, a); });
    bucketed_ = true;
    for (const Item& item : small_) PushToBucket(item);
    small_.clear();
    small_.shrink_to_fit();
  }

  void PushToBucket(const Item& item) {
    auto [it, inserted] = bucket_of_key_.try_emplace(item.key, static_cast<int32_t>(buckets_.size()));
    if (inserted) buckets_.emplace_back();
    Bucket& b = buckets_[static_cast<size_t>(it->second)];
    if (b.empty()) {
      keys_.push_back(item.key);
      std::push_heap(keys_.begin(), keys_.end(), std::greater<int32_t>());
    }
    if (!BlockFifos<Item>::empty(b.fifo) && item.left < fifos_.back(b.fifo).left) {
      b.late.push_back(item);
      std::push_heap(b.late.begin(), b.late.end(), RightOf);
    } else {
      fifos_.push_back(b.fifo, item);
    }
  }

  bool bucketed_ = false;
  std::vector<Item> small_;  // before bucketed_: a heap on (key, left)
  std::vector<Bucket> buckets_;
  BlockFifos<Item> fifos_;
  absl::flat_hash_map<int32_t, int32_t> bucket_of_key_;
  std::vector<int32_t> keys_;
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_MERGE_QUEUE_H_
