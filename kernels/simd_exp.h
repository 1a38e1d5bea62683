// e^x on F32 lanes, written once over a SIMD traits type V (simd_avx2.h,
// simd_avx512.h: Set1, Min, Max, RoundNearest, Fma, ScaleByPow2), for the
// attention kernels' softmax and the feed-forward block's SiLU.
//
// Include only from SIMD translation units: everything is in an anonymous
// namespace (the ODR rule in cpu_features.h).
#ifndef KVSESSION_KERNELS_SIMD_EXP_H_
#define KVSESSION_KERNELS_SIMD_EXP_H_

namespace kvs {
namespace {

// e^x with relative error below 2e-7 for x in [-87, 88]; smaller x give
// e^-87 (below 1.7e-38) instead of 0. x = n ln2 + r with |r| <= ln2 / 2
// (ln2 split in two for an exact n ln2), e^r by its degree-7 Taylor
// polynomial, then scaled by 2^n.
template <class V>
typename V::F Exp(typename V::F x) {
  using F = typename V::F;
  x = V::Min(V::Max(x, V::Set1(-87.0f)), V::Set1(88.0f));
  const F n = V::RoundNearest(V::Mul(x, V::Set1(1.44269504088896341f)));
  F r = V::Fma(n, V::Set1(-0.693359375f), x);
  r = V::Fma(n, V::Set1(2.12194440e-4f), r);
  constexpr float kTaylor[] = {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
  F p = V::Set1(1.0f / 5040);
#pragma GCC unroll 8
  for (int i = 0; i < 7; ++i) p = V::Fma(p, r, V::Set1(kTaylor[i]));
  return V::ScaleByPow2(p, n);
}

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_SIMD_EXP_H_
