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

void RopeApply(RopeStyle style, float* x, int n_heads, int head_dim, int rope_dim,
               const float* cos_sin) {
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

}  // namespace kvs
