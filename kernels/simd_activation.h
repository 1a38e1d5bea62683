// The feed-forward block's SwiGLU (activation.h SiluMul), and the
// residual's AddInPlace, written once over
// a SIMD traits type V, instantiated by activation_avx2.cc and
// activation_avx512.cc: silu(g) * up = g / (1 + e^-g) * up, the scalar
// level's formula, with e^x from simd_exp.h (within 2e-7 of libm's, so a
// SIMD level's values are within a few ulps of the scalar level's; each
// value depends only on its own inputs, whatever the batch).
//
// Include only from SIMD translation units: everything is in an anonymous
// namespace (the ODR rule in cpu_features.h).
#ifndef KVSESSION_KERNELS_SIMD_ACTIVATION_H_
#define KVSESSION_KERNELS_SIMD_ACTIVATION_H_

#include <cstdint>

#include "kernels/simd_exp.h"

namespace kvs {
namespace {

template <class V>
typename V::F SiluTimes(typename V::F g, typename V::F up) {
  const typename V::F e = Exp<V>(V::Sub(V::Zero(), g));
  return V::Mul(V::Div(g, V::Add(V::Set1(1.0f), e)), up);
}

template <class V>
void SiluMulWith(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) V::Store(gate + i, SiluTimes<V>(V::Load(gate + i), V::Load(up + i)));
  if (i < n) {
    const int left = static_cast<int>(n - i);
    V::StorePartial(gate + i, SiluTimes<V>(V::LoadPartial(gate + i, left), V::LoadPartial(up + i, left)), left);
  }
}

// x[i] += y[i]: one F32 addition each, the scalar level's bits.
template <class V>
void AddInPlaceWith(float* x, const float* y, int64_t n) {
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) V::Store(x + i, V::Add(V::Load(x + i), V::Load(y + i)));
  if (i < n) {
    const int left = static_cast<int>(n - i);
    V::StorePartial(x + i, V::Add(V::LoadPartial(x + i, left), V::LoadPartial(y + i, left)), left);
  }
}

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_SIMD_ACTIVATION_H_
