// Packed Q8_0 x Q8_0 activations on AMX (see packed_q8_0.h for the layout
// and the arithmetic every kernel shares bit for bit). Compiled with AMX
// and AVX-512 flags; its table entry is set only when AmxAvailable() (so
// after EnableAmx() succeeded).
//
// Per 16 activation rows x 16 weight rows and per 32-block: one TDPBSUD
// multiplies the activation tile (16 x 32 int8) by the packed weight tile
// (32 x 16, q + 128) into 16 x 16 exact int32 sums; each row of them is
// corrected by 128 * sum(x), converted, scaled and added in block order.
// GCC 12 flags its own _mm512_cvtepi32_ps (an intentionally undefined
// pass-through operand) as maybe-uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "kernels/kernel_table.h"
#include "kernels/packed_q8_0.h"

namespace kvs {
namespace packed_q8_0_internal {
namespace {

constexpr int kArchGetXcompPerm = 0x1022;
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

size_t ScalesBytes(int64_t nb) { return (static_cast<size_t>(nb) * 32 + 63) / 64 * 64; }

// Tile 0: C, 16 x 16 int32. Tile 1: activations, 16 rows x 32 int8.
// Tile 2: packed weights, 8 rows x 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

thread_local bool t_configured = false;

void ConfigureTiles() {
  if (t_configured) return;
  TileConfig cfg{};
  cfg.palette_id = 1;
  cfg.colsb[0] = 64;
  cfg.rows[0] = 16;
  cfg.colsb[1] = 32;
  cfg.rows[1] = 16;
  cfg.colsb[2] = 64;
  cfg.rows[2] = 8;
  _tile_loadconfig(&cfg);
  t_configured = true;
}

// Per-thread scratch (grown on first use): a zero-padded partial
// activation tile, block sums of 16 activation rows, the int32 tile.
struct Scratch {
  uint8_t* base = nullptr;
  size_t bytes = 0;
  ~Scratch() { std::free(base); }
  uint8_t* Get(size_t want) {
    if (want > bytes) {
      std::free(base);
      bytes = (want + 4095) / 4096 * 4096;
      base = static_cast<uint8_t*>(std::aligned_alloc(64, bytes));
    }
    return base;
  }
};
thread_local Scratch t_scratch;

}  // namespace

bool EnableAmx() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  if (!((d >> 24) & 1) || !((d >> 25) & 1)) return false;  // AMX-TILE, AMX-INT8
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  unsigned long bitmask = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &bitmask) != 0) return false;
  return (bitmask >> kXfeatureXtiledata) & 1;
}

namespace {

void MatmulAmx(const uint8_t* packed, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
               const uint8_t* xq, size_t x_row_bytes, size_t scales_offset, int nx, float* y,
               int64_t y_stride, int64_t /*ask_end: AMX runs prefill's many rows, from cache*/) {
  ConfigureTiles();
  if (r1 > rows) r1 = rows;
  const int64_t nb = cols / 32;
  const size_t group_bytes = PackedQ8_0GroupBytes(cols);
  const size_t pad_bytes = 16 * x_row_bytes;
  uint8_t* scratch = t_scratch.Get(pad_bytes + 16 * nb * 4 + 1024);
  uint8_t* apad = scratch;
  int32_t* xsum = reinterpret_cast<int32_t*>(scratch + pad_bytes);
  int32_t* ctile = xsum + 16 * nb;
  const __m512i ones = _mm512_set1_epi16(1);

  for (int m0 = 0; m0 < nx; m0 += 16) {
    const int mm = nx - m0 < 16 ? nx - m0 : 16;
    const uint8_t* a = xq + static_cast<size_t>(m0) * x_row_bytes;
    if (mm < 16) {  // a partial tile: zero-padded copy
      std::memset(apad, 0, pad_bytes);
      std::memcpy(apad, a, static_cast<size_t>(mm) * x_row_bytes);
      a = apad;
    }
    for (int i = 0; i < 16; ++i) {
      const int8_t* x = reinterpret_cast<const int8_t*>(a + i * x_row_bytes);
      for (int64_t b = 0; b < nb; ++b) {
        const __m512i v = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32 * b)));
        xsum[b * 16 + i] = -128 * _mm512_reduce_add_epi32(_mm512_madd_epi16(v, ones));
      }
    }
    for (int64_t g = r0 / 16; g * 16 < r1; ++g) {
      const uint8_t* group = packed + g * group_bytes;
      const uint16_t* scales = reinterpret_cast<const uint16_t*>(group);
      const uint8_t* quants = group + ScalesBytes(nb);
      __m512 acc[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        _tile_zero(0);
        _tile_loadd(1, a + b * 32, static_cast<long>(x_row_bytes));
        _tile_loadd(2, quants + b * 512, 64);
        _tile_dpbsud(0, 1, 2);
        _tile_stored(0, ctile, 64);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + 16 * b)));
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) {
          if (i >= mm) break;  // padding rows of a partial tile
          const float dx = reinterpret_cast<const float*>(a + i * x_row_bytes + scales_offset)[b];
          const __m512i p = _mm512_add_epi32(_mm512_load_si512(ctile + 16 * i),
                                             _mm512_set1_epi32(xsum[b * 16 + i]));
          acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc[i]);
        }
      }
      const int64_t lo = r0 > 16 * g ? r0 - 16 * g : 0;
      const int64_t hi = r1 < 16 * g + 16 ? r1 - 16 * g : 16;
      const __mmask16 mask = static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
      for (int i = 0; i < mm; ++i) {
        _mm512_mask_storeu_ps(y + static_cast<int64_t>(m0 + i) * y_stride + 16 * g, mask, acc[i]);
      }
    }
  }
}

}  // namespace
}  // namespace packed_q8_0_internal

namespace kernel_table {

void FillAmxPackedQ8_0(KernelTable* t) {
  t->packed_q8_0_wide = packed_q8_0_internal::MatmulAmx;
  t->amx = true;
}

}  // namespace kernel_table
}  // namespace kvs
