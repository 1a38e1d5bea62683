// Test helper for the logit-ranking kernels (top_logits.h, sort_logits.h):
// the reference order they must reproduce, computed independently of them.
#ifndef KVSESSION_KERNELS_RANKED_LOGITS_TEST_UTIL_H_
#define KVSESSION_KERNELS_RANKED_LOGITS_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvs {

// Every non-NaN index of x, best first (larger logit, then the smaller
// index), by std::stable_sort with the float comparison (so +0 and -0 tie).
inline std::vector<int32_t> StableRanked(const std::vector<float>& x) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isnan(x[i])) ids.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
  return ids;
}

}  // namespace kvs

#endif  // KVSESSION_KERNELS_RANKED_LOGITS_TEST_UTIL_H_
