// Internal to kernels/: the k best logits seen so far, as a heap whose top
// is the worst of them (top_logits.h states the order). TopK at every level
// scans the logits in index order and offers each one that beats Worst();
// since a later index loses a tie, "beats" is simply "larger than".
// The heap lives in the caller's `out` array; Finish sorts it best first.
//
// Everything is in an anonymous namespace (BetterLogit too, in
// top_logits.h), so the std:: heap algorithms are instantiated anew in each
// SIMD translation unit that includes this (the ODR rule in cpu_features.h).
#ifndef KVSESSION_KERNELS_TOP_LOGIT_HEAP_H_
#define KVSESSION_KERNELS_TOP_LOGIT_HEAP_H_

#include <algorithm>
#include <cstdint>

#include "kernels/top_logits.h"

namespace kvs {
namespace {

class TopLogitHeap {
 public:
  TopLogitHeap(int k, TopLogit* out) : k_(k), out_(out) {}

  bool full() const { return size_ >= k_; }
  // A full heap's worst logit: only larger ones enter.
  float Worst() const { return out_[0].logit; }

  // Offers logit x at index i, scanned in increasing i; NaN never enters.
  void Offer(float x, int64_t i) {
    if (!full()) {
      if (x != x) return;
      out_[size_++] = {x, static_cast<int32_t>(i)};
      std::push_heap(out_, out_ + size_, BetterLogit());
    } else if (x > out_[0].logit) {
      std::pop_heap(out_, out_ + size_, BetterLogit());
      out_[size_ - 1] = {x, static_cast<int32_t>(i)};
      std::push_heap(out_, out_ + size_, BetterLogit());
    }
  }

  int Finish() {
    std::sort_heap(out_, out_ + size_, BetterLogit());
    return size_;
  }

 private:
  int k_;
  TopLogit* out_;
  int size_ = 0;
};

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_TOP_LOGIT_HEAP_H_
