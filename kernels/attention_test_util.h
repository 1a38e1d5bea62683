// Test helper for the attention tests' naive references: the queries as
// the kernels score them against a cache of type `dtype`.
#ifndef KVSESSION_KERNELS_ATTENTION_TEST_UTIL_H_
#define KVSESSION_KERNELS_ATTENTION_TEST_UTIL_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/attention_q8_0_scores.h"
#include "kernels/kv_dtype.h"

namespace kvs {

// `q` (queries of head_dim values laid end to end) as a Q8_0 cache's
// scores see them: each query rounded to Q8_0 (attention_q8_0_scores.h)
// and back to F32. Other cache types score the queries as they are.
inline std::vector<float> QueriesAsScored(KvDtype dtype, const std::vector<float>& q, int head_dim) {
  if (dtype != KvDtype::kQ8_0) return q;
  std::vector<float> out(q.size());
  std::vector<uint8_t> rounded(QueryQ8_0Bytes(head_dim));
  for (size_t i = 0; i + head_dim <= q.size(); i += head_dim) {
    QuantizeQueryQ8_0(q.data() + i, head_dim, 1.0f, rounded.data());
    for (int d = 0; d < head_dim; ++d) {
      float scale;
      std::memcpy(&scale, rounded.data() + head_dim + sizeof(float) * (d / 32), sizeof scale);
      out[i + d] = static_cast<float>(static_cast<int8_t>(rounded[d])) * scale;
    }
  }
  return out;
}

}  // namespace kvs

#endif  // KVSESSION_KERNELS_ATTENTION_TEST_UTIL_H_
