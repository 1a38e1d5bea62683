// Test helper for the attention tests' naive references: the queries as
// the kernels score them against a cache of type `dtype`.
#ifndef KVSESSION_KERNELS_ATTENTION_TEST_UTIL_H_
#define KVSESSION_KERNELS_ATTENTION_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_q8_0_scores.h"
#include "kernels/attention_q8_0_values.h"
#include "kernels/fp16.h"
#include "kernels/kv_dtype.h"
#include "kernels/q8_0_kv_blocks.h"

namespace kvs {

// n_keys keys stored as rows of `dtype` (StoreKv) at `keys`, laid end to
// end, put in place in the order a cache of that type holds them: for
// q8_0, packed groups of 16 keys (q8_0_kv_blocks.h), so any run of whole
// groups is a block of a page of that many tokens. `keys` must have room
// for whole groups (a cache's kernels read them whole); the last group's
// missing slots keep the bytes they had. Other types are rows already.
inline void KeysAsCached(KvDtype dtype, uint8_t* keys, int n_keys, int head_dim) {
  if (dtype != KvDtype::kQ8_0) return;
  const size_t group_bytes = Q8_0KeyGroupBytes(head_dim);
  std::vector<uint8_t> rows(group_bytes);
  for (int k0 = 0; k0 < n_keys; k0 += kQ8_0KeyGroupSlots) {
    const int n = std::min(kQ8_0KeyGroupSlots, n_keys - k0);
    uint8_t* group = keys + static_cast<size_t>(k0 / kQ8_0KeyGroupSlots) * group_bytes;
    std::memcpy(rows.data(), group, static_cast<size_t>(n) * KvBytes(KvDtype::kQ8_0, head_dim));
    Q8_0KeyBlockFromRows(rows.data(), n, head_dim, group);
  }
}
// The same for a buffer of n_keys rows, first grown to whole groups.
inline void KeysAsCached(KvDtype dtype, std::vector<uint8_t>& keys, int n_keys, int head_dim) {
  if (dtype != KvDtype::kQ8_0) return;
  keys.resize(std::max(keys.size(), Q8_0KeyGroupBytes(head_dim) * ((n_keys + kQ8_0KeyGroupSlots - 1) /
                                                                    kQ8_0KeyGroupSlots)));
  KeysAsCached(dtype, keys.data(), n_keys, head_dim);
}

// n_keys values stored as rows of `dtype` (StoreKv) at `rows`, laid end
// to end, as a cache of that type holds them in blocks of block_keys
// slots laid end to end: for q8_0, each block its slots' scales, then
// their quants (q8_0_kv_blocks.h); the other types' rows as they are. The
// result holds whole blocks (the last block's missing slots are zeros).
// The naive references keep reading `rows`.
inline std::vector<uint8_t> ValuesAsCached(KvDtype dtype, const uint8_t* rows, int n_keys, int head_dim,
                                           int block_keys) {
  const size_t row_bytes = KvBytes(dtype, head_dim);
  const int n_blocks = (n_keys + block_keys - 1) / block_keys;
  std::vector<uint8_t> out(static_cast<size_t>(n_blocks) * block_keys * row_bytes, 0);
  if (dtype != KvDtype::kQ8_0) {
    std::memcpy(out.data(), rows, static_cast<size_t>(n_keys) * row_bytes);
    return out;
  }
  for (int b = 0; b < n_blocks; ++b) {
    const size_t first = static_cast<size_t>(b) * block_keys;
    Q8_0ValueBlockFromRows(rows + first * row_bytes, std::min(block_keys, n_keys - static_cast<int>(first)),
                           head_dim, block_keys, out.data() + first * row_bytes);
  }
  return out;
}

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
// step of it goes into slack. Where the active level folds int16 groups
// (attention.h Q8_0ValuesInInt16Groups), out uses the unrounded weights and
// slack holds each key's rounding bound instead: a step of its group
// (at most P * S / 2^13, P its largest p and S its block's largest |scale|;
// keys [16g, 16g + 16) of a block of `block_keys`) times |quant|.
inline NaiveValueSum NaiveValues(KvDtype dtype, const std::vector<double>& s, const std::vector<int>& step_ends,
                                 const std::vector<float>& values, const uint8_t* rows, int hd, int block_keys) {
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
  const int blocks = hd / kKvQ8_0BlockValues;
  const bool groups = Q8_0ValuesInInt16Groups(hd);
  // x[j * blocks + b]: key j's p * scale of value block b against the
  // step's running max; rescale[j] takes it to the final max and sum.
  // prob[j] is key j's p and scale[j * blocks + b] the block's scale.
  std::vector<double> x(static_cast<size_t>(n) * blocks), rescale(n), prob(n), scale(x.size());
  double running = -1e300;
  int step = 0, step_end = 0;
  for (int j = 0; j < n; ++j) {
    if (j == step_end) {  // the next step: its keys' max joins the running max
      step_end = std::min(step_ends[step++], n);
      for (int t = j; t < step_end; ++t) running = std::max(running, s[t]);
    }
    rescale[j] = std::exp(running - mx) / z;
    for (int b = 0; b < blocks; ++b) {
      uint16_t half;
      std::memcpy(&half, rows + j * row_bytes + static_cast<size_t>(b) * kKvQ8_0BlockBytes, 2);
      prob[j] = std::exp(s[j] - running);
      scale[static_cast<size_t>(j) * blocks + b] = Fp16ToFp32(half);
      x[static_cast<size_t>(j) * blocks + b] = prob[j] * Fp16ToFp32(half);
    }
  }
  if (groups) {
    for (int g0 = 0; g0 < n;) {  // a group: keys [16g, 16g + 16) of a block
      const int g1 = std::min({g0 + kQ8_0ValueGroupKeys - g0 % block_keys % kQ8_0ValueGroupKeys,
                               (g0 / block_keys + 1) * block_keys, n});
      for (int b = 0; b < blocks; ++b) {
        double largest_p = 0, largest_s = 0;
        for (int j = g0; j < g1; ++j) {
          largest_p = std::max(largest_p, prob[j]);
          largest_s = std::max(largest_s, std::abs(scale[static_cast<size_t>(j) * blocks + b]));
        }
        const double step = largest_p * largest_s * 0x1p-13 * (1 + 1e-5);  // at least the group's step
        for (int j = g0; j < g1; ++j) {
          for (int d = 0; d < kKvQ8_0BlockValues; ++d) {
            const double quant = static_cast<int8_t>(rows[j * row_bytes + b * kKvQ8_0BlockBytes + 2 + d]);
            r.out[b * kKvQ8_0BlockValues + d] += x[static_cast<size_t>(j) * blocks + b] * rescale[j] * quant;
            r.slack[b * kKvQ8_0BlockValues + d] += step * rescale[j] * std::abs(quant);
          }
        }
      }
      g0 = g1;
    }
    return r;
  }
  for (int j = 0; j < n; ++j) {
    for (int b = 0; b < blocks; ++b) {
      const uint8_t* block = rows + j * row_bytes + static_cast<size_t>(b) * kKvQ8_0BlockBytes;
      const double x_jb = x[static_cast<size_t>(j) * blocks + b];
      const double w = RoundToBf16(static_cast<float>(x_jb));
      double ambiguous = 0;  // (a zero scale's weight is exactly 0)
      if (x_jb != 0) {
        const double step_size = std::ldexp(1.0, std::ilogb(x_jb) - 7);  // a BF16 step at x
        const double frac = x_jb / step_size - std::floor(x_jb / step_size);
        if (std::abs(frac - 0.5) * step_size < 1e-5 * std::abs(x_jb)) ambiguous = step_size;
      }
      for (int d = 0; d < kKvQ8_0BlockValues; ++d) {
        const double quant = static_cast<int8_t>(block[2 + d]);
        r.out[b * kKvQ8_0BlockValues + d] += w * rescale[j] * quant;
        r.slack[b * kKvQ8_0BlockValues + d] += ambiguous * rescale[j] * std::abs(quant);
      }
    }
  }
  return r;
}

// The largest |x| of xs.
inline double MaxAbs(const std::vector<float>& xs) {
  double m = 0;
  for (float x : xs) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}

// How far the active level's attention output over a q8_0 cache with heads
// of head_dim values may lie from the scalar level's, beyond summation
// order, when the active level folds int16 groups
// (Q8_0ValuesInInt16Groups) and the scalar one BF16 weights: a BF16 weight
// lies within 2^-8 of p * s (8 significant bits), an int16 one within a
// step (at most P * S / 2^13, P the group's largest p and S its block's
// largest |scale|), so with probabilities summing to 1 the two outputs lie
// within (2^-8 + 16 / 2^13) * max|v| of each
// other, max|v| the largest |value| in the cache. 0 where the two levels
// share a contract.
inline double Q8_0ContractGap(int head_dim, double max_abs_value) {
  if (!Q8_0ValuesInInt16Groups(head_dim)) return 0;
  return (0x1p-8 + 16 * 0x1p-13) * max_abs_value * 1.01;
}

}  // namespace kvs

#endif  // KVSESSION_KERNELS_ATTENTION_TEST_UTIL_H_
