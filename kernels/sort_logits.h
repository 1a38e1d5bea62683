// SortLogits: every logit of a vocabulary in the order of top_logits.h
// (larger first, ties to the smaller index; NaN left out), for sampling
// with top-k off, where top-p, min-p and the draw walk the whole sorted
// vocabulary.
//
// A stable least-significant-digit radix sort on the logits' bits: a pass
// builds the keys, one counts the three digits, then up to three passes
// scatter (a pass whose digit is the same for every key is skipped). Over a
// 151,936-token vocabulary that is well under a millisecond, where
// std::sort over (logit, id) pairs took about 19 ms. The result is exactly
// the order such a sort gives: +0 and -0 compare equal (ties by index),
// and the entries carry the logits as given (a -0 stays -0).
//
// No allocation: the caller passes `scratch` with room for 2 * n keys.
// Thread safety: a pure function of its arguments.
#ifndef KVSESSION_KERNELS_SORT_LOGITS_H_
#define KVSESSION_KERNELS_SORT_LOGITS_H_

#include <cstdint>

#include "kernels/top_logits.h"

namespace kvs {

// The non-NaN values of x[0, n), best first, into out[0, count); returns
// count. `out` holds n entries, `scratch` 2 * n; n < 2^31.
int SortLogits(const float* x, int64_t n, TopLogit* out, uint64_t* scratch);

}  // namespace kvs

#endif  // KVSESSION_KERNELS_SORT_LOGITS_H_
