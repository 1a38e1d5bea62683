#include "kernels/sort_logits.h"

#include <cmath>
#include <cstring>
#include <utility>

namespace kvs {
namespace {

// Digits of the 32-bit order key, least significant first.
constexpr int kDigitBits[3] = {11, 11, 10};
constexpr int kDigitShift[3] = {0, 11, 22};
constexpr int kBuckets = 1 << 11;

constexpr uint32_t kSign = 0x80000000u;

// Branch-free: logits are positive or negative at random.
uint32_t AllOnesIfNegative(uint32_t bits) {
  return static_cast<uint32_t>(static_cast<int32_t>(bits) >> 31);
}

// A key whose ascending unsigned order is the logits' descending order,
// with +0 and -0 equal.
uint32_t DescendingKey(uint32_t bits) {
  bits &= (bits & ~kSign) == 0 ? 0u : ~0u;
  const uint32_t ascending = bits ^ (AllOnesIfNegative(bits) | kSign);
  return ~ascending;
}

// The logit's bits back from its key (a zero comes back as +0).
uint32_t LogitBits(uint32_t key) {
  const uint32_t ascending = ~key;
  return ascending ^ (~AllOnesIfNegative(ascending) | kSign);
}

uint32_t Digit(uint64_t key_and_id, int d) {
  return static_cast<uint32_t>(key_and_id >> (32 + kDigitShift[d])) & ((1u << kDigitBits[d]) - 1);
}

}  // namespace

int SortLogits(const float* x, int64_t n, TopLogit* out, uint64_t* scratch) {
  // Entries are key << 32 | the index, with bit 31 set for a -0 (which
  // the key cannot tell from +0). They are built in index order, so a
  // stable sort on the key's digits leaves equal keys in index order.
  uint32_t counts[3][kBuckets] = {};
  uint64_t* from = scratch;
  uint64_t* to = scratch + n;
  int m = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], sizeof bits);
    const uint32_t negative_zero = bits == kSign ? kSign : 0;
    from[m] = (static_cast<uint64_t>(DescendingKey(bits)) << 32) | negative_zero | static_cast<uint32_t>(i);
    m += !std::isnan(x[i]);
  }
  for (int i = 0; i < m; ++i) {
    const uint64_t e = from[i];
    ++counts[0][Digit(e, 0)];
    ++counts[1][Digit(e, 1)];
    ++counts[2][Digit(e, 2)];
  }
  for (int d = 0; d < 3; ++d) {
    uint32_t* c = counts[d];
    if (m == 0 || c[Digit(from[0], d)] == static_cast<uint32_t>(m)) continue;  // one digit: order kept
    uint32_t start = 0;
    for (int b = 0; b < (1 << kDigitBits[d]); ++b) {
      const uint32_t count = c[b];
      c[b] = start;
      start += count;
    }
    for (int i = 0; i < m; ++i) to[c[Digit(from[i], d)]++] = from[i];
    std::swap(from, to);
  }
  for (int i = 0; i < m; ++i) {
    const uint32_t low = static_cast<uint32_t>(from[i]);
    const uint32_t bits = LogitBits(static_cast<uint32_t>(from[i] >> 32)) | (low & kSign);
    out[i].id = static_cast<int32_t>(low & ~kSign);
    std::memcpy(&out[i].logit, &bits, sizeof bits);
  }
  return m;
}

}  // namespace kvs
