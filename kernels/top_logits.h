// Picking the largest logits, for sampling: Argmax (greedy decoding), TopK
// (the sampler's top-k truncation) and LogitsAbove (the few near the top,
// with top-k off), exact, in a defined order, and the same answer at every
// kernel level.
//
// Order: a logit is better than another when it is larger, or equal and at
// a smaller index (the order std::max_element and a stable sort by
// descending logit give). NaN logits are never picked.
//
// Both read `x` once or twice from front to back and allocate nothing; the
// SIMD levels compare a vector of logits at a time (simd_top_logits.h), so
// a 151,936-token vocabulary takes tens of microseconds rather than the
// hundreds std::max_element and std::partial_sort over (logit, id) pairs
// took. Thread safety: pure functions.
#ifndef KVSESSION_KERNELS_TOP_LOGITS_H_
#define KVSESSION_KERNELS_TOP_LOGITS_H_

#include <cstdint>

namespace kvs {

struct TopLogit {
  float logit;
  int32_t id;
};

// The order above as a comparator (true when a comes before b), for
// std::sort and the heap algorithms. In an anonymous namespace so that each
// SIMD translation unit instantiates the std:: algorithms anew (the ODR
// rule in cpu_features.h).
namespace {
struct BetterLogit {
  bool operator()(const TopLogit& a, const TopLogit& b) const {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }
};
}  // namespace

// The index of the best of x[0, n): the first of the largest non-NaN
// values; 0 when n <= 0 or every value is NaN.
int64_t Argmax(const float* x, int64_t n);

// The min(k, non-NaN count) best of x[0, n) into out[0, ...), best first;
// returns how many. `out` holds k entries; n < 2^31.
int TopK(const float* x, int64_t n, int k, TopLogit* out);

// The entries of x[0, n) larger than `floor` (never a NaN), in increasing
// index, into out[0, ...): returns how many, or max_out + 1 as soon as
// there are more than max_out (out then holds the first max_out). `out`
// holds max_out entries. With the vocabulary's largest logit m, the
// entries above m - d are the best ones of a sort in some order: the
// sampler sorts these few instead of the vocabulary (sampler.h).
int LogitsAbove(const float* x, int64_t n, float floor, int max_out, TopLogit* out);

// The scalar level's entries (the reference the SIMD ones match).
int64_t ArgmaxScalar(const float* x, int64_t n);
int TopKScalar(const float* x, int64_t n, int k, TopLogit* out);
int LogitsAboveScalar(const float* x, int64_t n, float floor, int max_out, TopLogit* out);

}  // namespace kvs

#endif  // KVSESSION_KERNELS_TOP_LOGITS_H_
