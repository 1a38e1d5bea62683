#include "kernels/norm.h"

#include <cmath>

namespace kvs {

void RmsNorm(const float* x, const float* weight, float eps, int64_t n, float* out) {
  double sum = 0;  // double: the sum of squares of a 4096-wide row loses digits in F32
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum / n + eps));
  if (weight != nullptr) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale;
  }
}

}  // namespace kvs
