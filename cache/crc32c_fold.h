// CRC-32C by carry-less multiplication (the crc32c.h contract), written
// once over a vector width: included only by crc32c_clmul_avx512.cc (512-bit
// VPCLMULQDQ) and crc32c_clmul_avx2.cc (256-bit), each compiled for its
// instructions. Pure functions, thread-safe.
//
// The method is the published one for any CRC polynomial P (Gopal et al.,
// "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ", Intel,
// 2009), in the reflected bit order CRC-32C uses. A 128-bit chunk of the
// message, read little-endian, is the polynomial whose coefficient of
// x^(127 - k) is bit k; its low quadword L and high quadword H make L x^64
// + H. Moving a chunk D bits further on multiplies it by x^D, and modulo P
//   L x^(64 + D) + H x^D  ==  L K1 x + H K2,  K1 = x^(63 + D), K2 = x^(D - 1) mod P,
// where the products are carry-less multiplications of quadwords (the "x"
// is the bit a reflected carry-less product comes out shifted by). So
// eight vector accumulators take 8 vectors of bytes a step, each folded
// over the bits to its next chunk and that chunk added (XOR; eight rather
// than four: 1.1x the rate on Zen 5). At the end they are folded into one
// 128-bit chunk with the same CRC as the bytes so far, which the CRC
// instruction (SSE4.2) finishes, then the bytes left over. The initial
// register is added into the first four bytes, as the CRC instruction
// does with its state.
//
// Everything here is in an anonymous namespace: each including file is
// compiled for other instructions, and a shared inline definition could
// run one file's instructions in the other's caller (the ODR rule of
// kernels/cpu_features.h).
#ifndef KVSESSION_CACHE_CRC32C_FOLD_H_
#define KVSESSION_CACHE_CRC32C_FOLD_H_

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "cache/crc32c.h"

namespace kvs::crc32c_internal {
namespace {

// x^n mod P (P = CRC-32C's polynomial, 0x11EDC6F41 not reflected) as the
// high 32 bits of a reflected quadword (the coefficient of x^(63 - j) in
// bit j): the form K1 and K2 take above.
constexpr uint64_t XPowModP(int n) {
  uint64_t r = 1;  // x^0, not reflected: bit i is the coefficient of x^i
  for (int i = 0; i < n; ++i) {
    r <<= 1;
    if (r & (uint64_t{1} << 32)) r ^= 0x11EDC6F41ull;
  }
  uint64_t reflected = 0;
  for (int i = 0; i < 32; ++i) {
    if (r & (uint64_t{1} << i)) reflected |= uint64_t{1} << (63 - i);
  }
  return reflected;
}

// K1 and K2 for a fold over kBits bits, as one 128-bit lane (K1 low, K2
// high), computed when compiled.
template <int kBits>
__m128i FoldConstants() {
  constexpr uint64_t k1 = XPowModP(63 + kBits), k2 = XPowModP(kBits - 1);
  return _mm_set_epi64x(static_cast<long long>(k2), static_cast<long long>(k1));
}

// One 128-bit lane folded over the bits of k (FoldConstants).
__m128i FoldLane(__m128i a, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11));
}

// Vec: a vector of kLanes 128-bit lanes, with
//   static Reg Load(const uint8_t*);
//   static Reg Constants(__m128i k)       k in every lane
//   static Reg FoldAdd(Reg a, Reg k, Reg b)   every lane of a folded by k, plus b
//   static Reg Xor(Reg a, Reg b);
//   static Reg WithFirstWord(Reg a, uint32_t w)   a with w added into its first 4 bytes
//   static __m128i Lane(Reg a, int i);
// Requires n >= 8 * kLanes * 16 (the first step).
template <class Vec>
uint32_t FoldCrc32c(const uint8_t* p, size_t n, uint32_t init) {
  using Reg = typename Vec::Reg;
  constexpr int kLanes = Vec::kLanes;
  constexpr size_t kBytes = 16 * kLanes;  // one vector
  constexpr size_t kStep = 8 * kBytes;
  Reg acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = Vec::Load(p + kBytes * i);
  acc[0] = Vec::WithFirstWord(acc[0], ~init);
  p += kStep;
  n -= kStep;
  constexpr int kVectorBits = 8 * static_cast<int>(kBytes);
  const Reg k_step = Vec::Constants(FoldConstants<8 * kVectorBits>());
  for (; n >= kStep; n -= kStep, p += kStep) {
    for (int i = 0; i < 8; ++i) acc[i] = Vec::FoldAdd(acc[i], k_step, Vec::Load(p + kBytes * i));
  }
  // Eight accumulators into four (each over the half step to the one four
  // vectors on), the four into the last, then its lanes into one.
  const Reg k_half = Vec::Constants(FoldConstants<4 * kVectorBits>());
  for (int i = 0; i < 4; ++i) acc[i] = Vec::FoldAdd(acc[i], k_half, acc[i + 4]);
  Reg z = Vec::FoldAdd(acc[0], Vec::Constants(FoldConstants<3 * kVectorBits>()), acc[3]);
  z = Vec::FoldAdd(acc[1], Vec::Constants(FoldConstants<2 * kVectorBits>()), z);
  z = Vec::FoldAdd(acc[2], Vec::Constants(FoldConstants<kVectorBits>()), z);
  __m128i x = Vec::Lane(z, kLanes - 1);
  if constexpr (kLanes == 4) {
    x = _mm_xor_si128(x, FoldLane(Vec::Lane(z, 0), FoldConstants<384>()));
    x = _mm_xor_si128(x, FoldLane(Vec::Lane(z, 1), FoldConstants<256>()));
  }
  static_assert(kLanes == 2 || kLanes == 4);
  x = _mm_xor_si128(x, FoldLane(Vec::Lane(z, kLanes - 2), FoldConstants<128>()));
  // x has the CRC of every byte so far, as a 16-byte message with a zero
  // register: the CRC instruction finishes it, then the bytes left over.
  uint64_t crc = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(x)));
  crc = _mm_crc32_u64(crc, static_cast<uint64_t>(_mm_extract_epi64(x, 1)));
  return Sse42(p, n, ~static_cast<uint32_t>(crc));
}

}  // namespace
}  // namespace kvs::crc32c_internal

#endif  // KVSESSION_CACHE_CRC32C_FOLD_H_
