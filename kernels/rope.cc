#include "kernels/rope.h"

#include <cmath>

namespace kvs {

void RopeAngles(int64_t pos, const float* inv_freq, int rope_dim, float* cos_sin) {
  for (int i = 0; i < rope_dim / 2; ++i) {
    const double theta = static_cast<double>(pos) * inv_freq[i];
    cos_sin[2 * i] = static_cast<float>(std::cos(theta));
    cos_sin[2 * i + 1] = static_cast<float>(std::sin(theta));
  }
}

namespace {

// RopeApply pair by pair: for rope dimensions past RopeApply's buffers.
void RopeApplyPairs(RopeStyle style, float* x, int n_heads, int head_dim, int rope_dim, const float* cos_sin) {
  const int half = rope_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
      float* a = style == RopeStyle::kAdjacent ? v + 2 * i : v + i;
      float* b = style == RopeStyle::kAdjacent ? v + 2 * i + 1 : v + i + half;
      const float x0 = *a, x1 = *b;
      *a = x0 * c - x1 * s;
      *b = x0 * s + x1 * c;
    }
  }
}

}  // namespace

// GCC's -O2 cost model vectorizes only loops whose trip count it knows;
// the "cheap" one takes these (clang vectorizes them at -O2 as they are).
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("vect-cost-model=cheap")))
#endif
void RopeApply(RopeStyle style, float* x, int n_heads, int head_dim, int rope_dim,
               const float* cos_sin) {
  const int half = rope_dim / 2;
  // The angles' cosines and sines apart, once per call, and one loop per
  // style, so the compiler vectorizes the rotations (the same operations
  // per pair as ever).
  constexpr int kMaxHalf = 256;
  if (half > kMaxHalf) return RopeApplyPairs(style, x, n_heads, head_dim, rope_dim, cos_sin);
  alignas(64) float cos_of[kMaxHalf], sin_of[kMaxHalf];
  for (int i = 0; i < half; ++i) cos_of[i] = cos_sin[2 * i], sin_of[i] = cos_sin[2 * i + 1];
  for (int h = 0; h < n_heads; ++h) {
    float* __restrict v = x + static_cast<int64_t>(h) * head_dim;
    if (style == RopeStyle::kAdjacent) {
      for (int i = 0; i < half; ++i) {
        const float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * cos_of[i] - x1 * sin_of[i];
        v[2 * i + 1] = x0 * sin_of[i] + x1 * cos_of[i];
      }
    } else {
      float* __restrict a = v;         // [0, half)
      float* __restrict b = v + half;  // [half, rope_dim): apart from a
      for (int i = 0; i < half; ++i) {
        const float x0 = a[i], x1 = b[i];
        a[i] = x0 * cos_of[i] - x1 * sin_of[i];
        b[i] = x0 * sin_of[i] + x1 * cos_of[i];
      }
    }
  }
}

}  // namespace kvs
