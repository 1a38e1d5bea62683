// crc32c_internal::Avx512Clmul: the carry-less fold (crc32c_fold.h) in
// 512-bit registers, four lanes each, 512 bytes a step. Compiled with
// AVX-512F, VPCLMULQDQ, PCLMULQDQ and SSE4.2; called only where
// HaveAvx512Clmul().
// GCC 12 flags its own intrinsics (intentionally undefined pass-through
// operands) as maybe-uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#if defined(__x86_64__)
#include "cache/crc32c_fold.h"

namespace kvs::crc32c_internal {
namespace {

struct Zmm {
  using Reg = __m512i;
  static constexpr int kLanes = 4;
  static Reg Load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static Reg Constants(__m128i k) { return _mm512_broadcast_i32x4(k); }
  static Reg FoldAdd(Reg a, Reg k, Reg b) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, k, 0x00), _mm512_clmulepi64_epi128(a, k, 0x11), b,
                                     0x96);  // the three XORed
  }
  static Reg WithFirstWord(Reg a, uint32_t w) {
    return _mm512_xor_si512(a, _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(w))));
  }
  static __m128i Lane(Reg a, int i) {
    switch (i) {
      case 0: return _mm512_extracti32x4_epi32(a, 0);
      case 1: return _mm512_extracti32x4_epi32(a, 1);
      case 2: return _mm512_extracti32x4_epi32(a, 2);
      default: return _mm512_extracti32x4_epi32(a, 3);
    }
  }
};

}  // namespace

uint32_t Avx512Clmul(const void* data, size_t n, uint32_t init) {
  if (n < kClmulMinBytes) return Sse42(data, n, init);
  return FoldCrc32c<Zmm>(static_cast<const uint8_t*>(data), n, init);
}

}  // namespace kvs::crc32c_internal

#endif  // defined(__x86_64__)
