// Internal to kernels/: RmsNorm (norm.h) for one SIMD level, generic over
// its float traits V (simd_avx2.h, simd_avx512.h) and its "8 double lanes"
// traits D (simd_avx2_doubles.h, simd_avx512_doubles.h: V, Zero, Add,
// Squares8(x) = the squares of x[0, 8) in double, lane k x[k]'s, and
// Store(double[8], V)).
//
// The same bits as the scalar level (norm.cc): lane k of the running sum
// takes the squares of x_i, i = k (mod 8), for i < n - n % 8, in
// increasing i (a float's square is exact in double, so it does not matter
// whether the level adds it with an FMA); the last n % 8 go into a ninth
// sum; the nine are added in order; out = x * scale * weight in two F32
// roundings. Include after the traits, from the level's own translation
// unit, compiled with -ffp-contract=off.
#ifndef KVSESSION_KERNELS_SIMD_NORM_H_
#define KVSESSION_KERNELS_SIMD_NORM_H_

#include <cmath>
#include <cstdint>

namespace kvs {
namespace {

template <class V, class D>
void RmsNormSimd(const float* x, const float* weight, float eps, int64_t n, float* out) {
  typename D::V lanes = D::Zero();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) lanes = D::Add(lanes, D::Squares8(x + i));
  alignas(64) double s[8];
  D::Store(s, lanes);
  double rest = 0;
  for (; i < n; ++i) rest += static_cast<double>(x[i]) * x[i];
  const double sum = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7] + rest;
  const float scale = static_cast<float>(1.0 / std::sqrt(sum / n + eps));
  const typename V::F vscale = V::Set1(scale);
  constexpr int L = V::kLanes;
  i = 0;
  if (weight != nullptr) {
    for (; i + L <= n; i += L) V::Store(out + i, V::Mul(V::Mul(V::Load(x + i), vscale), V::Load(weight + i)));
    if (i < n) {
      const int left = static_cast<int>(n - i);
      V::StorePartial(out + i, V::Mul(V::Mul(V::LoadPartial(x + i, left), vscale), V::LoadPartial(weight + i, left)),
                      left);
    }
  } else {
    for (; i + L <= n; i += L) V::Store(out + i, V::Mul(V::Load(x + i), vscale));
    if (i < n) {
      const int left = static_cast<int>(n - i);
      V::StorePartial(out + i, V::Mul(V::LoadPartial(x + i, left), vscale), left);
    }
  }
}

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_SIMD_NORM_H_
