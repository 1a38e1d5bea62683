// Packed Q8_0 x Q8_0 activations on AMX (see packed_q8_0.h for the layout
// and the arithmetic every kernel shares bit for bit). Compiled with AMX
// and AVX-512 flags; its table entry is set only when AmxAvailable() (so
// after EnableAmx() succeeded). Runs batches of kAmxMinRows activation
// rows or more (prefill).
//
// Per 16 activation rows (a tile), per 16 weight rows (a group), per
// 32-block b in order: one TDPBSSD multiplies the activation tile (16 x 32
// int8) by the block's weight tile (32 x 16 int8) into 16 x 16 exact int32
// sums, TILESTORED puts them in a ring in scratch, and 16 AVX-512 rows add
// them to 16 registers of accumulators,
//   acc[i] = fma(float(isum[i]), d_w[b] * d_x[i][b], acc[i])
// the contract's float operations in block order (|isum| < 2^24, so the
// conversion is exact). The accumulators stay in registers over all nb
// blocks; y is written once per 16 x 16 output.
//
// Software pipeline: block b multiplies in C tile b % 4 (4 C tiles and 2
// each of activation and weight tiles: all 8), issued kIssueAhead blocks
// before its sums are added and stored kStoreAhead block before, so the
// TMUL and the tile stores run while the vector units add earlier blocks.
//
// Signed weights: the packed quants are q + 128 (for VNNI's u8 x s8). A
// call of kSignedMinTiles activation tiles or more first copies its groups,
// a pass of up to kPassBytes at a time (a 192-row engine task of 1,024
// columns is one pass), to per-thread scratch as int8 q (XOR 0x80) with
// F32 scales, and every tile runs over the pass. A call of fewer tiles
// multiplies the packed bytes (TDPBSUD) and adds -128 * sum(x) to each
// row's sums instead. Activation scales (and those sums) are transposed
// once per call to [tile][block][row], so a block's 16 rows read one line.
//
// The kernel this replaces did per block and 16 x 16 output: TILEZERO, one
// TDPBSUD into its only C tile, the store, then the adds (with the
// correction), each waiting on the one before. Measured on the 2-core
// Sapphire Rapids VM (kvs-bench-kernels, one core):
// gemm_packed/Q8_0/avx512/nx512/3072x1024 6.8 -> 4.2 ms, /tasks192 (as the
// engine cuts it) 7.0 -> 4.8 ms, 1024x3072/tasks64 9.4 -> 4.8 ms.
//
// What bounds it there: with any AMX instruction in flight, 512-bit vector
// ops run at half rate (a block's 48 adding ops took 8.4 ns alone and 15
// ns beside one TILEZERO a block), and a block's tile work (two loads, the
// multiply, a 1 KB store) takes about as long again; the two overlap only
// partly. Measured and not kept (3072x1024, nx 512): one pipeline running
// on across groups, with the blocks in chunks of 8 so an activation chunk
// stays in L1, 1.15x slower (and no faster with the same activations and
// weights for every tile: the cache was not what bound it); a chunk's tile
// work and then its adds (out of AMX's slow mode), 1.1-1.6x slower;
// float(isum) as bits(isum + 0x4B400000) - 12582912.0f, the offset added in
// integers or by loading the C tile with it instead of TILEZERO, 1.0-1.15x
// slower; asking for the weights' lines 2-8 blocks ahead, or for y's lines
// for writing at the start of an output, no faster; passes of 128 KB to
// 1 MB, the same.
//
// Thread safety: tile configuration and scratch are per thread; calls may
// run concurrently on disjoint outputs.
//
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

#include "kernels/amx_tiles.h"
#include "kernels/kernel_table.h"
#include "kernels/packed_q8_0.h"
#include "kernels/packed_q8_0_group.h"

namespace kvs {
namespace packed_q8_0_internal {
namespace {

constexpr int kArchGetXcompPerm = 0x1022;
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

// Tiles 0-3: C, 16 x 16 int32 (block b's in tile b % 4). Tiles 4, 5:
// activations, 16 rows x 32 int8 (block b's in 4 + b % 2). Tiles 6, 7:
// weights, 8 rows x 64 bytes (block b's in 6 + b % 2). Loaded through
// UseAmxTileConfig, as the attention kernels load theirs (amx_tiles.h).
const AmxTileConfig& GemmTileConfig() {
  static const AmxTileConfig config = [] {
    AmxTileConfig c;
    for (int t = 0; t < 4; ++t) {
      c.colsb[t] = 64;
      c.rows[t] = 16;
    }
    for (int t = 4; t < 6; ++t) {
      c.colsb[t] = 32;
      c.rows[t] = 16;
      c.colsb[t + 2] = 64;
      c.rows[t + 2] = 8;
    }
    return c;
  }();
  return config;
}

void ConfigureTiles() { UseAmxTileConfig(GemmTileConfig()); }

// Per-thread scratch (grown on first use): a pass's signed weight groups,
// a zero-padded partial activation tile, the transposed activation scales
// (and corrections), the ring of int32 tiles.
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

// Signed weights one pass keeps (in L2) while every activation tile runs
// over them: an engine task's groups (12 of 1,024 columns) in one pass.
constexpr size_t kPassBytes = 256 * 1024;
// Blocks a multiply is issued ahead of the adding of its sums, and its
// sums stored ahead (C tiles: kIssueAhead <= 4; issuing 2 or 3 ahead, or
// storing 2 ahead, measured the same or slower).
constexpr int kIssueAhead = 4;
constexpr int kStoreAhead = 1;
// Activation tiles from which a call copies its weights signed. Fewer
// tiles multiply the packed weights (TDPBSUD) and subtract 128 * sum(x)
// per block and row: the copy (one more read and write of the weights)
// costs more than those adds for 1 or 2 tiles, the same for 3, less from
// 4 (3072x1024 in one call, packed weights against the copy: nx 16 184
// against 338 us, nx 48 537 against 538, nx 64 705 against 615, nx 512
// 5.7 against 4.0 ms).
constexpr int kSignedMinTiles = 3;

// A group's signed copy: F32 scales [nb][16], then int8 quants
// [nb][8][16][4] (the packed bytes XOR 0x80: q itself, the tile layout
// TDPBSSD takes).
size_t SignedGroupBytes(int64_t nb) { return static_cast<size_t>(nb) * (64 + 512); }

void CopySigned(const uint8_t* group, int64_t nb, uint8_t* out) {
  const uint16_t* scales = reinterpret_cast<const uint16_t*>(group);
  const uint8_t* quants = group + ScalesBytes(nb);
  float* dw = reinterpret_cast<float*>(out);
  uint8_t* q = out + nb * 64;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + 16 * b));
    _mm512_store_ps(dw + 16 * b, _mm512_cvtph_ps(half));
#pragma GCC unroll 8
    for (int kk = 0; kk < 8; ++kk) {
      const size_t at = static_cast<size_t>(b) * 512 + kk * 64;
      _mm512_store_si512(q + at, _mm512_xor_si512(_mm512_loadu_si512(quants + at), flip));
    }
  }
}

// C tile c += its activation tile times its weight tile: TDPBSSD for int8
// weights, TDPBSUD for the packed q + 128. Tile numbers are immediates,
// hence the switches.
template <bool kSigned>
inline void Dot(int c) {
  if constexpr (kSigned) {
    switch (c) {
      case 0: _tile_dpbssd(0, 4, 6); break;
      case 1: _tile_dpbssd(1, 5, 7); break;
      case 2: _tile_dpbssd(2, 4, 6); break;
      default: _tile_dpbssd(3, 5, 7); break;
    }
  } else {
    switch (c) {
      case 0: _tile_dpbsud(0, 4, 6); break;
      case 1: _tile_dpbsud(1, 5, 7); break;
      case 2: _tile_dpbsud(2, 4, 6); break;
      default: _tile_dpbsud(3, 5, 7); break;
    }
  }
}

// Block b's multiply: its C tile zeroed, then activation tile `a` (16 rows
// `a_stride` apart) times weight tile `w`.
template <bool kSigned>
inline void Multiply(int64_t b, const uint8_t* a, size_t a_stride, const uint8_t* w) {
  const long stride = static_cast<long>(a_stride);
  switch (b & 3) {
    case 0:
      _tile_zero(0);
      _tile_loadd(4, a, stride);
      _tile_loadd(6, w, 64);
      break;
    case 1:
      _tile_zero(1);
      _tile_loadd(5, a, stride);
      _tile_loadd(7, w, 64);
      break;
    case 2:
      _tile_zero(2);
      _tile_loadd(4, a, stride);
      _tile_loadd(6, w, 64);
      break;
    default:
      _tile_zero(3);
      _tile_loadd(5, a, stride);
      _tile_loadd(7, w, 64);
      break;
  }
  Dot<kSigned>(static_cast<int>(b & 3));
}

// Block b's sums to ring slot b % 4 (1 KB each).
inline void Store(int64_t b, int32_t* ring) {
  int32_t* at = ring + 256 * (b & 3);
  switch (b & 3) {
    case 0: _tile_stored(0, at, 64); break;
    case 1: _tile_stored(1, at, 64); break;
    case 2: _tile_stored(2, at, 64); break;
    default: _tile_stored(3, at, 64); break;
  }
}

// One 16 x 16 output (activation tile `a`, weight group `group`) over all
// nb blocks, stored to y under `mask` for rows [0, mm). `dx_t`: the tile's
// activation scales, [b][16]. kSigned: `group` is a signed copy
// (CopySigned); else the packed group itself, and `corr_t` ([b][16]) holds
// -128 * sum(x) of each row and block, added to the int32 sums.
template <bool kSigned>
inline void OutputTile(const uint8_t* a, size_t a_stride, const uint8_t* group, int64_t nb,
                       const float* dx_t, const int32_t* corr_t, int32_t* ring, float* y,
                       int64_t y_stride, int mm, __mmask16 mask) {
  const uint8_t* w = group + (kSigned ? nb * 64 : ScalesBytes(nb));
  __m512 acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < kIssueAhead && b < nb; ++b) Multiply<kSigned>(b, a + 32 * b, a_stride, w + 512 * b);
  for (int64_t b = 0; b < kStoreAhead && b < nb; ++b) Store(b, ring);
  for (int64_t b = 0; b < nb; ++b) {
    if (b + kStoreAhead < nb) Store(b + kStoreAhead, ring);
    const int64_t ahead = b + kIssueAhead;
    if (ahead < nb) Multiply<kSigned>(ahead, a + 32 * ahead, a_stride, w + 512 * ahead);
    // The contract's float ops: (d_w * d_x) rounded, then one fma.
    const int32_t* sums = ring + 256 * (b & 3);
    __m512 dwb;
    if constexpr (kSigned) {
      dwb = _mm512_load_ps(reinterpret_cast<const float*>(group) + 16 * b);
    } else {
      dwb = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + 32 * b)));
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      __m512i isum = _mm512_load_si512(sums + 16 * i);
      if constexpr (!kSigned) isum = _mm512_add_epi32(isum, _mm512_set1_epi32(corr_t[16 * b + i]));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dwb, _mm512_set1_ps(dx_t[16 * b + i])),
                               acc[i]);
    }
  }
  // Constant indices only (unrolled), so acc stays in registers.
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) {
    if (i < mm) _mm512_mask_storeu_ps(y + i * y_stride, mask, acc[i]);
  }
}

void MatmulAmx(const uint8_t* packed, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
               const uint8_t* xq, size_t x_row_bytes, size_t scales_offset, int nx, float* y,
               int64_t y_stride, int64_t /*ask_end, asked: AMX runs prefill's many rows, from cache*/, bool) {
  ConfigureTiles();
  if (r1 > rows) r1 = rows;
  const int64_t nb = cols / 32;
  const size_t group_bytes = PackedQ8_0GroupBytes(cols);
  const int64_t g0 = r0 / 16, g1 = (r1 + 15) / 16;
  const int tiles = (nx + 15) / 16;
  const int tail = nx % 16;
  const bool use_signed = tiles >= kSignedMinTiles;
  const size_t signed_bytes = SignedGroupBytes(nb);
  int64_t pass_groups = use_signed ? static_cast<int64_t>(kPassBytes / signed_bytes) : g1 - g0;
  if (pass_groups < 1) pass_groups = 1;
  if (pass_groups > g1 - g0) pass_groups = g1 - g0;
  const size_t copy_bytes = use_signed ? pass_groups * signed_bytes : 0;
  const size_t pad_bytes = (16 * x_row_bytes + 63) / 64 * 64;
  const size_t per_tile_bytes = static_cast<size_t>(nb) * 16 * sizeof(float);
  const size_t dx_bytes = tiles * per_tile_bytes;
  const size_t corr_bytes = use_signed ? 0 : dx_bytes;
  uint8_t* scratch = t_scratch.Get(copy_bytes + pad_bytes + dx_bytes + corr_bytes + 4 * 1024);
  uint8_t* signed_groups = scratch;
  uint8_t* apad = scratch + copy_bytes;
  float* dx_all = reinterpret_cast<float*>(apad + pad_bytes);
  int32_t* corr_all = reinterpret_cast<int32_t*>(apad + pad_bytes + dx_bytes);
  int32_t* ring = reinterpret_cast<int32_t*>(apad + pad_bytes + dx_bytes + corr_bytes);
  if (tail > 0) {  // the partial activation tile: a zero-padded copy
    std::memset(apad, 0, pad_bytes);
    std::memcpy(apad, xq + static_cast<size_t>(tiles - 1) * 16 * x_row_bytes,
                static_cast<size_t>(tail) * x_row_bytes);
  }
  auto tile_rows = [&](int t) {
    return tail > 0 && t == tiles - 1 ? apad : xq + static_cast<size_t>(t) * 16 * x_row_bytes;
  };
  // Per tile, [b][i]: the scales (and for packed weights the corrections)
  // of its 16 rows; padding rows' are 0.
  const __m512i ones = _mm512_set1_epi16(1);
  for (int t = 0; t < tiles; ++t) {
    const uint8_t* a = tile_rows(t);
    float* dx_t = dx_all + static_cast<size_t>(t) * nb * 16;
    int32_t* corr_t = corr_all + static_cast<size_t>(t) * nb * 16;
    for (int i = 0; i < 16; ++i) {
      const uint8_t* row = a + i * x_row_bytes;
      const float* dx = reinterpret_cast<const float*>(row + scales_offset);
      for (int64_t b = 0; b < nb; ++b) dx_t[16 * b + i] = dx[b];
      if (use_signed) continue;
      for (int64_t b = 0; b < nb; ++b) {
        const __m512i q = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * b)));
        corr_t[16 * b + i] = -128 * _mm512_reduce_add_epi32(_mm512_madd_epi16(q, ones));
      }
    }
  }
  for (int64_t p0 = g0; p0 < g1; p0 += pass_groups) {
    const int64_t p1 = p0 + pass_groups < g1 ? p0 + pass_groups : g1;
    if (use_signed) {
      for (int64_t g = p0; g < p1; ++g) {
        CopySigned(packed + g * group_bytes, nb, signed_groups + (g - p0) * signed_bytes);
      }
    }
    // TILELOADD's asm names no memory: the stores above must be done first.
    asm volatile("" ::: "memory");
    for (int t = 0; t < tiles; ++t) {
      const int m0 = 16 * t;
      const int mm = nx - m0 < 16 ? nx - m0 : 16;
      const float* dx_t = dx_all + static_cast<size_t>(t) * nb * 16;
      const int32_t* corr_t = corr_all + static_cast<size_t>(t) * nb * 16;
      for (int64_t g = p0; g < p1; ++g) {
        // Lanes of this group inside [r0, r1).
        const int64_t lo = r0 > 16 * g ? r0 - 16 * g : 0;
        const int64_t hi = r1 < 16 * g + 16 ? r1 - 16 * g : 16;
        const __mmask16 mask = static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
        float* out = y + static_cast<int64_t>(m0) * y_stride + 16 * g;
        if (use_signed) {
          OutputTile<true>(tile_rows(t), x_row_bytes, signed_groups + (g - p0) * signed_bytes, nb, dx_t, nullptr,
                           ring, out, y_stride, mm, mask);
        } else {
          OutputTile<false>(tile_rows(t), x_row_bytes, packed + g * group_bytes, nb, dx_t, corr_t, ring, out,
                            y_stride, mm, mask);
        }
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
