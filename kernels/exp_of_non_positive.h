// Internal to kernels/: the arithmetic of ExpOfNonPositive
// (softmax_denominator.h), written once over a "double lanes" type D so
// that the scalar level and the SIMD levels run the same IEEE operations
// in the same order. D provides: Set1, Add, Sub, Mul, and
// ScaleByPowerOfTwo(p, t) = p * 2^k where t = kMagic + k (k an integer
// held in t's low mantissa bits).
//
// e^d = 2^k * e^r with k = round(d / ln 2) and r = d - k ln 2 (ln 2 in two
// parts, the first with trailing zeros so k * kLn2Hi is exact), |r| <=
// 0.35; e^r by its Taylor series to r^13 (truncation below 5e-18).
// Compile only without fused multiply-adds (-ffp-contract=off, or no FMA
// at all), or the levels' bits part.
#ifndef KVSESSION_KERNELS_EXP_OF_NON_POSITIVE_H_
#define KVSESSION_KERNELS_EXP_OF_NON_POSITIVE_H_

namespace kvs {
namespace {

// Below this, e^d is taken as 0 (and 2^k stays a normal number above it).
constexpr double kExpLowest = -708.0;
constexpr double kLog2E = 1.4426950408889634074;
// 1.5 * 2^52: adding it rounds a smaller value to an integer, which then
// sits in the sum's low mantissa bits.
constexpr double kRoundMagic = 6755399441055744.0;
constexpr double kLn2Hi = 0x1.62e42fee00000p-1;
constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;

// e^d for lanes with kExpLowest <= d <= 0 (the caller zeroes the others).
template <class D>
inline typename D::V ExpOfNonPositiveLanes(typename D::V d) {
  using V = typename D::V;
  const V t = D::Add(D::Mul(d, D::Set1(kLog2E)), D::Set1(kRoundMagic));
  const V k = D::Sub(t, D::Set1(kRoundMagic));
  const V r = D::Sub(D::Sub(d, D::Mul(k, D::Set1(kLn2Hi))), D::Mul(k, D::Set1(kLn2Lo)));
  V p = D::Set1(1.0 / 6227020800.0);  // 1/13!
  p = D::Add(D::Mul(p, r), D::Set1(1.0 / 479001600.0));
  p = D::Add(D::Mul(p, r), D::Set1(1.0 / 39916800.0));
  p = D::Add(D::Mul(p, r), D::Set1(1.0 / 3628800.0));
  p = D::Add(D::Mul(p, r), D::Set1(1.0 / 362880.0));
  p = D::Add(D::Mul(p, r), D::Set1(1.0 / 40320.0));
  p = D::Add(D::Mul(p, r), D::Set1(1.0 / 5040.0));
  p = D::Add(D::Mul(p, r), D::Set1(1.0 / 720.0));
  p = D::Add(D::Mul(p, r), D::Set1(1.0 / 120.0));
  p = D::Add(D::Mul(p, r), D::Set1(1.0 / 24.0));
  p = D::Add(D::Mul(p, r), D::Set1(1.0 / 6.0));
  p = D::Add(D::Mul(p, r), D::Set1(0.5));
  p = D::Add(D::Mul(p, r), D::Set1(1.0));
  p = D::Add(D::Mul(p, r), D::Set1(1.0));
  return D::ScaleByPowerOfTwo(p, t);
}

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_EXP_OF_NON_POSITIVE_H_
