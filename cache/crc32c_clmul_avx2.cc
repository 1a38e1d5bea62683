// crc32c_internal::Avx2Clmul: the carry-less fold (crc32c_fold.h) in 256-bit
// registers, two lanes each, 256 bytes a step: for CPUs with VPCLMULQDQ but
// not AVX-512 (Zen 3, and Ice Lake's AVX2 level). Compiled with AVX2,
// VPCLMULQDQ, PCLMULQDQ and SSE4.2; called only where HaveAvx2Clmul().
#if defined(__x86_64__)
#include "cache/crc32c_fold.h"

namespace kvs::crc32c_internal {
namespace {

struct Ymm {
  using Reg = __m256i;
  static constexpr int kLanes = 2;
  static Reg Load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static Reg Constants(__m128i k) { return _mm256_broadcastsi128_si256(k); }
  static Reg FoldAdd(Reg a, Reg k, Reg b) {
    return _mm256_xor_si256(
        _mm256_xor_si256(_mm256_clmulepi64_epi128(a, k, 0x00), _mm256_clmulepi64_epi128(a, k, 0x11)), b);
  }
  static Reg WithFirstWord(Reg a, uint32_t w) {
    return _mm256_xor_si256(a, _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(w))));
  }
  static __m128i Lane(Reg a, int i) {
    return i == 0 ? _mm256_castsi256_si128(a) : _mm256_extracti128_si256(a, 1);
  }
};

}  // namespace

uint32_t Avx2Clmul(const void* data, size_t n, uint32_t init) {
  if (n < kClmulMinBytes) return Sse42(data, n, init);
  return FoldCrc32c<Ymm>(static_cast<const uint8_t*>(data), n, init);
}

}  // namespace kvs::crc32c_internal

#endif  // defined(__x86_64__)
