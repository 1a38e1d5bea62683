// Internal to kernels/: Argmax, TopK and LogitsAbove (top_logits.h) for one SIMD level,
// generic over its vector traits S (simd_avx2.h, simd_avx512.h: Load, Max,
// GreaterMask, EqualMask, kLanes). Include after the traits, from the
// level's own translation unit (top_logits_<level>.cc).
#ifndef KVSESSION_KERNELS_SIMD_TOP_LOGITS_H_
#define KVSESSION_KERNELS_SIMD_TOP_LOGITS_H_

#include <cstdint>

#include "kernels/top_logit_heap.h"
#include "kernels/top_logits.h"

namespace kvs {
namespace {

// Two passes: the largest non-NaN value (Max keeps its second operand when
// the first is NaN), then the first index holding it.
template <class S>
int64_t ArgmaxSimd(const float* x, int64_t n) {
  constexpr int L = S::kLanes;
  const float neg_inf = -__builtin_inff();
  typename S::F m = S::Set1(neg_inf);
  int64_t i = 0;
  for (; i + L <= n; i += L) m = S::Max(S::Load(x + i), m);
  alignas(64) float lanes[L];
  S::Store(lanes, m);
  float best = neg_inf;
  for (int l = 0; l < L; ++l) best = lanes[l] > best ? lanes[l] : best;
  for (int64_t t = i; t < n; ++t) best = x[t] > best ? x[t] : best;
  const typename S::F target = S::Set1(best);
  for (i = 0; i + L <= n; i += L) {
    const unsigned eq = S::EqualMask(S::Load(x + i), target);
    if (eq != 0) return i + __builtin_ctz(eq);
  }
  for (; i < n; ++i) {
    if (x[i] == best) return i;
  }
  return 0;  // every value NaN (or n <= 0)
}

// Offers logits to the heap one by one until it is full, then a vector at a
// time: only lanes larger than the heap's worst are offered.
template <class S>
int TopKSimd(const float* x, int64_t n, int k, TopLogit* out) {
  constexpr int L = S::kLanes;
  TopLogitHeap heap(k, out);
  if (k <= 0) return 0;
  int64_t i = 0;
  for (; i < n && !heap.full(); ++i) heap.Offer(x[i], i);
  for (; i + L <= n; i += L) {
    unsigned gt = S::GreaterMask(S::Load(x + i), S::Set1(heap.Worst()));
    for (; gt != 0; gt &= gt - 1) {
      const int l = __builtin_ctz(gt);
      heap.Offer(x[i + l], i + l);
    }
  }
  for (; i < n; ++i) heap.Offer(x[i], i);
  return heap.Finish();
}

// A vector of logits at a time; the lanes above the floor (few, near the
// top) are written one by one.
template <class S>
int LogitsAboveSimd(const float* x, int64_t n, float floor, int max_out, TopLogit* out) {
  constexpr int L = S::kLanes;
  const typename S::F f = S::Set1(floor);
  int count = 0;
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    for (unsigned gt = S::GreaterMask(S::Load(x + i), f); gt != 0; gt &= gt - 1) {
      if (count == max_out) return max_out + 1;
      const int l = __builtin_ctz(gt);
      out[count++] = {x[i + l], static_cast<int32_t>(i + l)};
    }
  }
  for (; i < n; ++i) {
    if (!(x[i] > floor)) continue;
    if (count == max_out) return max_out + 1;
    out[count++] = {x[i], static_cast<int32_t>(i)};
  }
  return count;
}

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_SIMD_TOP_LOGITS_H_
