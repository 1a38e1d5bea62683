// Test helper for the attention tests' naive references: the queries as
// the kernels score them against a cache of type `dtype`.
#ifndef KVSESSION_KERNELS_ATTENTION_TEST_UTIL_H_
#define KVSESSION_KERNELS_ATTENTION_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/attention_q8_0_scores.h"
#include "kernels/attention_q8_0_values.h"
#include "kernels/fp16.h"
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

// A naive reference's attention output for one query: out[d], and
// slack[d], how far a kernel's result may lie from it beyond its summation
// order.
struct NaiveValueSum {
  std::vector<double> out, slack;
};

// The value sum of a query with scores s[0, n) (in double) over a cache of
// type `dtype`: `values` are the cached values as F32 (LoadKv), `rows` the
// cache's bytes (rows of hd values). A q8_0 cache's values are summed as
// attention_q8_0_values.h states: each key's block weight is its
// probability against the kernel's running max times the block's scale,
// rounded to BF16, so the reference needs the ends of the kernel's online
// softmax steps (`step_ends`: after step k the running max is the largest
// of s[0, step_ends[k]); the last end is n). A product within 1e-5 of a
// BF16 rounding midpoint may round either way in the kernel (its
// probability differs from the reference's in the last bits): one BF16
// step of it goes into slack.
inline NaiveValueSum NaiveValues(KvDtype dtype, const std::vector<double>& s, const std::vector<int>& step_ends,
                                 const std::vector<float>& values, const uint8_t* rows, int hd) {
  const int n = static_cast<int>(s.size());
  NaiveValueSum r{std::vector<double>(hd, 0.0), std::vector<double>(hd, 0.0)};
  if (n == 0) return r;
  const double mx = *std::max_element(s.begin(), s.end());
  double z = 0;
  for (double x : s) z += std::exp(x - mx);
  if (dtype != KvDtype::kQ8_0) {
    for (int j = 0; j < n; ++j) {
      const double p = std::exp(s[j] - mx) / z;
      for (int d = 0; d < hd; ++d) r.out[d] += p * values[static_cast<size_t>(j) * hd + d];
    }
    return r;
  }
  const size_t row_bytes = KvBytes(KvDtype::kQ8_0, hd);
  double running = -1e300;
  int step = 0, step_end = 0;
  for (int j = 0; j < n; ++j) {
    if (j == step_end) {  // the next step: its keys' max joins the running max
      step_end = std::min(step_ends[step++], n);
      for (int t = j; t < step_end; ++t) running = std::max(running, s[t]);
    }
    const double rescale = std::exp(running - mx) / z;
    for (int b = 0; b < hd / kKvQ8_0BlockValues; ++b) {
      const uint8_t* block = rows + j * row_bytes + static_cast<size_t>(b) * kKvQ8_0BlockBytes;
      uint16_t half;
      std::memcpy(&half, block, 2);
      const double x = std::exp(s[j] - running) * Fp16ToFp32(half);
      const double w = RoundToBf16(static_cast<float>(x));
      double ambiguous = 0;  // (a zero scale's weight is exactly 0)
      if (x != 0) {
        const double step_size = std::ldexp(1.0, std::ilogb(x) - 7);  // a BF16 step at x
        const double frac = x / step_size - std::floor(x / step_size);
        if (std::abs(frac - 0.5) * step_size < 1e-5 * std::abs(x)) ambiguous = step_size;
      }
      for (int d = 0; d < kKvQ8_0BlockValues; ++d) {
        const double quant = static_cast<int8_t>(block[2 + d]);
        r.out[b * kKvQ8_0BlockValues + d] += w * rescale * quant;
        r.slack[b * kKvQ8_0BlockValues + d] += ambiguous * rescale * std::abs(quant);
      }
    }
  }
  return r;
}

}  // namespace kvs

#endif  // KVSESSION_KERNELS_ATTENTION_TEST_UTIL_H_
