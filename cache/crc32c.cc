#include "cache/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace kvs {
namespace crc32c_internal {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // reflected 0x1EDC6F41

// kTables[0][b] is the CRC of byte b; kTables[k][b] advances that by k
// more zero bytes, so eight table lookups consume eight input bytes.
constexpr std::array<std::array<uint32_t, 256>, 8> MakeTables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kPolynomial : 0u);
    t[0][b] = crc;
  }
  for (int k = 1; k < 8; ++k) {
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  }
  return t;
}

constexpr auto kTables = MakeTables();

}  // namespace

uint32_t Portable(const void* data, size_t n, uint32_t init) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t crc = ~init;
  for (; n >= 8; n -= 8, p += 8) {
    const uint32_t lo = crc ^ (uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 |
                               uint32_t{p[3]} << 24);
    crc = kTables[7][lo & 0xFFu] ^ kTables[6][(lo >> 8) & 0xFFu] ^
          kTables[5][(lo >> 16) & 0xFFu] ^ kTables[4][lo >> 24] ^ kTables[3][p[4]] ^
          kTables[2][p[5]] ^ kTables[1][p[6]] ^ kTables[0][p[7]];
  }
  for (; n > 0; --n, ++p) crc = (crc >> 8) ^ kTables[0][(crc ^ *p) & 0xFFu];
  return ~crc;
}

namespace {

// Appending n zero bytes to a CRC register is linear over GF(2), so it is
// four table lookups: ZeroShift(n).Apply(r) == the register after n zero
// bytes from r.
struct ZeroShift {
  std::array<std::array<uint32_t, 256>, 4> t{};
  explicit ZeroShift(size_t n) {
    uint32_t basis[32];
    for (int bit = 0; bit < 32; ++bit) {
      uint32_t r = 1u << bit;
      for (size_t i = 0; i < n; ++i) r = (r >> 8) ^ kTables[0][r & 0xFFu];
      basis[bit] = r;
    }
    for (int k = 0; k < 4; ++k) {
      for (uint32_t b = 0; b < 256; ++b) {
        uint32_t r = 0;
        for (int bit = 0; bit < 8; ++bit) {
          if (b & (1u << bit)) r ^= basis[8 * k + bit];
        }
        t[k][b] = r;
      }
    }
  }
  uint32_t Apply(uint32_t r) const {
    return t[0][r & 0xFFu] ^ t[1][(r >> 8) & 0xFFu] ^ t[2][(r >> 16) & 0xFFu] ^ t[3][r >> 24];
  }
};

}  // namespace

#if defined(__x86_64__)

bool HaveSse42() { return __builtin_cpu_supports("sse4.2"); }

bool HaveAvx512Clmul() {
  return HaveSse42() && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("vpclmulqdq") &&
         __builtin_cpu_supports("avx512f");
}

bool HaveAvx2Clmul() {
  return HaveSse42() && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("vpclmulqdq") &&
         __builtin_cpu_supports("avx2");
}

__attribute__((target("sse4.2"))) uint32_t Sse42(const void* data, size_t n, uint32_t init) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint64_t crc = ~init;
  // Long inputs: three independent streams of kInterleaveBlock bytes at
  // once (the instruction's latency is 3 cycles, its throughput 1 per
  // cycle), joined by shifting the first two over the bytes after them.
  if (n >= 3 * kInterleaveBlock) {
    static const ZeroShift shift(kInterleaveBlock);
    constexpr size_t kWords = kInterleaveBlock / 8;
    for (; n >= 3 * kInterleaveBlock; n -= 3 * kInterleaveBlock, p += 3 * kInterleaveBlock) {
      uint64_t c0 = crc, c1 = 0, c2 = 0;
      for (size_t i = 0; i < kWords; ++i) {
        uint64_t w0, w1, w2;
        std::memcpy(&w0, p + 8 * i, 8);
        std::memcpy(&w1, p + kInterleaveBlock + 8 * i, 8);
        std::memcpy(&w2, p + 2 * kInterleaveBlock + 8 * i, 8);
        c0 = _mm_crc32_u64(c0, w0);
        c1 = _mm_crc32_u64(c1, w1);
        c2 = _mm_crc32_u64(c2, w2);
      }
      const uint32_t joined =
          shift.Apply(shift.Apply(static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1)) ^
          static_cast<uint32_t>(c2);
      crc = joined;
    }
  }
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    crc = _mm_crc32_u64(crc, word);
  }
  uint32_t crc32 = static_cast<uint32_t>(crc);
  for (; n > 0; --n, ++p) crc32 = _mm_crc32_u8(crc32, *p);
  return ~crc32;
}

#else

bool HaveSse42() { return false; }
uint32_t Sse42(const void* data, size_t n, uint32_t init) { return Portable(data, n, init); }
bool HaveAvx512Clmul() { return false; }
uint32_t Avx512Clmul(const void* data, size_t n, uint32_t init) { return Portable(data, n, init); }
bool HaveAvx2Clmul() { return false; }
uint32_t Avx2Clmul(const void* data, size_t n, uint32_t init) { return Portable(data, n, init); }

#endif

}  // namespace crc32c_internal

namespace {

using Crc32cFn = uint32_t (*)(const void*, size_t, uint32_t);

// The fastest implementation this CPU has for long inputs.
Crc32cFn LongInputs() {
  if (crc32c_internal::HaveAvx512Clmul()) return crc32c_internal::Avx512Clmul;
  if (crc32c_internal::HaveAvx2Clmul()) return crc32c_internal::Avx2Clmul;
  return crc32c_internal::HaveSse42() ? crc32c_internal::Sse42 : crc32c_internal::Portable;
}

}  // namespace

uint32_t Crc32c(const void* data, size_t n, uint32_t init) {
  static const bool have_sse42 = crc32c_internal::HaveSse42();
  static const Crc32cFn long_inputs = LongInputs();
  if (n >= crc32c_internal::kClmulMinBytes) return long_inputs(data, n, init);
  return have_sse42 ? crc32c_internal::Sse42(data, n, init)
                    : crc32c_internal::Portable(data, n, init);
}

}  // namespace kvs
