// Packed Q8_0 x Q8_0 activations on AVX2 (packed_q8_0.h states the layout
// and the arithmetic every kernel shares bit for bit, so this level, the
// AVX-512 one and AMX give the same results).
//
// A group's 16 rows are two halves of 8 lanes: the 64 bytes of a block's
// slice kk (quants 4kk..4kk+3 of each row) are 32 bytes for rows 0-7 and
// 32 for rows 8-15. AVX2 has no u8 x s8 dot product that cannot saturate
// with a 255 operand, so a slice is turned back into signed quants (xor
// 0x80) and its exact 4-term sums come from
//   vpmaddubsw(|q|, sign(x, q))   pairs of at most 2 * 128 * 127 < 2^15
//   vpmaddwd(.., 1)               the two pairs of each lane, in int32
// against a broadcast 4-byte slice of the activation block. Activation
// quants lie in [-127, 127] (QuantizeInt8Fn), so sign(x, q) never
// overflows, and |q| is exact for every q in [-128, 127].
//
// Tiles: one half-group (8 rows) by up to kXTile activation rows, or for
// a single activation row (decode) both halves at once, so a slice of the
// activation block is broadcast once for 16 rows. Weight halves are read
// from L1 by every tile of an activation chunk after the first; that
// first tile asks for the lines of the group two groups on, so the
// weights' read from memory overlaps the tiles' arithmetic instead of
// adding to it (kvs-bench-kernels gemm_packed/Q8_0/avx2/nx8/151936x1024,
// weights from memory, on Zen 3: 34-43 ms -> 29-35 ms per call).
//
// ScoresGroupAvx2 (the table's scores_q8_0_group) is the same arithmetic
// for a decode row's few queries against one key group of a q8_0 cache,
// which holds its keys in this layout (q8_0_kv_blocks.h).
#include <immintrin.h>

#include <cstring>

#include "kernels/kernel_table.h"
#include "kernels/packed_q8_0.h"
#include "kernels/packed_q8_0_group.h"

namespace kvs::kernel_table {
namespace {

constexpr int kXChunk = 16;  // activation rows per pass over the weights
constexpr int kXTile = 4;    // activation rows per register tile
// How many groups ahead the first tile of a many-row pass asks for.
constexpr size_t kGroupsAhead = 2;

// Lanes [lo, hi) set.
__m256i LaneMask(int lo, int hi) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(hi), lane),
                          _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(lo - 1)));
}

__m256i Slice(const int8_t* x) {
  int32_t slice;
  std::memcpy(&slice, x, 4);
  return _mm256_set1_epi32(slice);
}

// acc[h][j] (lane n: row 8 h + n of the halves `first`, first + 1, ...)
// for activation rows x[0..J); each block asks for the weight lines
// prefetch_ahead bytes on (0: none).
template <int H, int J>
void HalfTile(const uint8_t* group, int64_t nb, int first, const int8_t* const* x, const float* const* dx,
              size_t prefetch_ahead, __m256 (&acc)[H][J]) {
  const uint16_t* scales = reinterpret_cast<const uint16_t*>(group);
  const uint8_t* quants = group + ScalesBytes(nb);
  const __m256i ones = _mm256_set1_epi16(1), bias = _mm256_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h) {
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) acc[h][j] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wq = quants + b * 512;
    if (prefetch_ahead != 0) {
      for (int line = 0; line < 512; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(wq + prefetch_ahead + line), _MM_HINT_T0);
      }
    }
    __m256i isum[H][J];
#pragma GCC unroll 8
    for (int kk = 0; kk < 8; ++kk) {
      __m256i q[H], mag[H];
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h) {
        q[h] = _mm256_xor_si256(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq + kk * 64 + 32 * (first + h))), bias);
        mag[h] = _mm256_abs_epi8(q[h]);
      }
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) {
        const __m256i xs = Slice(x[j] + 32 * b + 4 * kk);
#pragma GCC unroll 4
        for (int h = 0; h < H; ++h) {
          const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(mag[h], _mm256_sign_epi8(xs, q[h])), ones);
          isum[h][j] = kk == 0 ? dot : _mm256_add_epi32(isum[h][j], dot);
          // Keeps the sum a chain in registers: GCC otherwise re-associates
          // it into a tree whose partial sums spill to the stack.
          asm("" : "+x"(isum[h][j]));
        }
      }
    }
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      const __m256 dw = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 16 * b + 8 * (first + h))));
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) {
        acc[h][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[h][j]), _mm256_mul_ps(dw, _mm256_set1_ps(dx[j][b])),
                                    acc[h][j]);
      }
    }
  }
}

// Stores lanes [lo, hi) of each accumulator; rows of y are y_stride apart.
template <int H, int J>
void StoreTile(const __m256 (&acc)[H][J], float* y, int64_t y_stride, int64_t row0, int lo, int hi) {
  for (int h = 0; h < H; ++h) {
    const int h_lo = lo - 8 * h < 0 ? 0 : lo - 8 * h, h_hi = hi - 8 * h > 8 ? 8 : hi - 8 * h;
    if (h_lo >= h_hi) continue;
    float* out = y + row0 + 8 * h;
    if (h_lo == 0 && h_hi == 8) {
      for (int j = 0; j < J; ++j) _mm256_storeu_ps(out + j * y_stride, acc[h][j]);
    } else {
      const __m256i mask = LaneMask(h_lo, h_hi);
      for (int j = 0; j < J; ++j) _mm256_maskstore_ps(out + j * y_stride, mask, acc[h][j]);
    }
  }
}

// HalfTile<1, J> and its store for a run-time J in [1, kXTile].
template <int J = kXTile>
void TileRows(int t, const uint8_t* group, int64_t nb, int half, const int8_t* const* x, const float* const* dx,
              size_t prefetch_ahead, float* y, int64_t y_stride, int64_t row0, int lo, int hi) {
  if constexpr (J > 1) {
    if (t < J) return TileRows<J - 1>(t, group, nb, half, x, dx, prefetch_ahead, y, y_stride, row0, lo, hi);
  }
  __m256 acc[1][J];
  HalfTile<1, J>(group, nb, half, x, dx, prefetch_ahead, acc);
  StoreTile<1, J>(acc, y, y_stride, row0, lo, hi);
}

// `ask_end` and `asked` unused: this kernel asks for a single row's group scales
// (AskForGroupScales) and kGroupsAhead groups on for more rows, whatever
// its range.
void MatmulAvx2(const uint8_t* packed, int64_t rows, int64_t cols, int64_t r0, int64_t r1, const uint8_t* xq,
                size_t x_row_bytes, size_t scales_offset, int nx, float* y, int64_t y_stride,
                int64_t /*ask_end*/, bool /*asked*/) {
  const int64_t nb = cols / 32;
  if (r1 > rows) r1 = rows;
  const size_t group_bytes = PackedQ8_0GroupBytes(cols);
  for (int j0 = 0; j0 < nx; j0 += kXChunk) {
    const int chunk = nx - j0 < kXChunk ? nx - j0 : kXChunk;
    const int8_t* x[kXChunk];
    const float* dx[kXChunk];
    for (int j = 0; j < chunk; ++j) {
      const uint8_t* row = xq + static_cast<size_t>(j0 + j) * x_row_bytes;
      x[j] = reinterpret_cast<const int8_t*>(row);
      dx[j] = reinterpret_cast<const float*>(row + scales_offset);
    }
    for (int64_t g = r0 / 16; g * 16 < r1; ++g) {
      const uint8_t* group = packed + g * group_bytes;
      // Lanes of this group inside [r0, r1).
      const int lo = static_cast<int>(r0 > 16 * g ? r0 - 16 * g : 0);
      const int hi = static_cast<int>(r1 < 16 * g + 16 ? r1 - 16 * g : 16);
      float* yg = y + static_cast<int64_t>(j0) * y_stride;
      if (chunk == 1) {  // decode: both halves per broadcast slice
        __m256 acc[2][1];
        AskForGroupScales(group, nb);
        HalfTile<2, 1>(group, nb, 0, x, dx, /*prefetch_ahead=*/0, acc);
        StoreTile<2, 1>(acc, yg, y_stride, 16 * g, lo, hi);
        continue;
      }
      for (int half = lo / 8; half < (hi + 7) / 8; ++half) {
        for (int jt = 0; jt < chunk; jt += kXTile) {
          const int t = chunk - jt < kXTile ? chunk - jt : kXTile;
          const size_t ahead = half == lo / 8 && jt == 0 ? kGroupsAhead * group_bytes : 0;
          TileRows(t, group, nb, half, x + jt, dx + jt, ahead, yg + jt * y_stride, y_stride, 16 * g + 8 * half,
                   lo - 8 * half, hi - 8 * half);
        }
      }
    }
  }
}

// Half-group `half` of up to 16 rows (rows[n], n < n_rows; missing rows
// zero): the 32 quants at byte `at` of rows 8 half .. 8 half + 7 are an
// 8 x 8 matrix of 4-byte slices, transposed (unpacks of 32 and 64 bits,
// then 128-bit lanes across two registers) so that w[kk], lane n, holds
// quants 4kk..4kk+3 of row 8 half + n, signed as stored.
__attribute__((always_inline)) inline void TransposeHalf(const uint8_t* const* rows, int n_rows, int half, size_t at,
                                                         __m256i (&w)[8]) {
  __m256i z[8], t[8], u[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    const int n = 8 * half + i;
    z[i] = n < n_rows ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[n] + at)) : _mm256_setzero_si256();
  }
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(z[i], z[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(z[i], z[i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // u[c] (c < 4): slice c of rows 0-3 of the half, then slice c + 4;
  // u[c + 4] the same for rows 4-7.
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    w[c] = _mm256_permute2x128_si256(u[c], u[c + 4], 0x20);
    w[c + 4] = _mm256_permute2x128_si256(u[c], u[c + 4], 0x31);
  }
}

// PackQ8_0Group: per block and half-group, TransposeHalf's slice kk of the
// 8 rows plus 128 is bytes 0-31 (rows 0-7) or 32-63 (rows 8-15) of slice
// kk. Missing rows are zero quants (stored as 128) with scale 0, as
// PackQ8_0GroupScalar.
void PackGroupAvx2(const uint8_t* const* rows, int n_rows, int64_t cols, uint8_t* out, const uint8_t* ahead,
                   size_t ahead_bytes) {
  const int64_t nb = cols / 32;
  const size_t scales_bytes = (static_cast<size_t>(nb) * 32 + 63) / 64 * 64;
  uint16_t* scales = reinterpret_cast<uint16_t*>(out);
  uint8_t* quants = out + scales_bytes;
  std::memset(out, 0, scales_bytes);
  // Each block asks for its share of the lines ahead, whole lines.
  const size_t ahead_step = (ahead_bytes / 64 / static_cast<size_t>(nb) + 1) * 64;
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < nb; ++b) {
    const size_t at = static_cast<size_t>(b) * 34;  // the block's scale; its quants 2 bytes on
    for (size_t off = b * ahead_step; off < ahead_bytes && off < (b + 1) * ahead_step; off += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead + off), _MM_HINT_T2);  // into L2 (BlockPrefetch)
    }
    uint8_t* wq = quants + b * 512;
    for (int half = 0; half < 2; ++half) {
      __m256i w[8];
      TransposeHalf(rows, n_rows, half, at + 2, w);
#pragma GCC unroll 8
      for (int kk = 0; kk < 8; ++kk) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(wq + kk * 64 + 32 * half), _mm256_xor_si256(w[kk], flip));
      }
    }
    for (int n = 0; n < n_rows; ++n) std::memcpy(scales + b * 16 + n, rows[n] + at, 2);
  }
}

// The scores of one key group (q8_0_kv_blocks.h: scales [nb][16], then
// the quants as q + 128 in the packed order, nb * 32 bytes in) for J
// queries: per block and half-group, the slices are loaded, turned back
// into signed quants (xor 0x80) and go into HalfTile's products (|k|
// against sign(x, k), the same exact int32 sums) and its scaled sums
// (fma(float(isum), d_k * d_x, acc), blocks in order), so every lane has
// MatmulAvx2's bits for that key and query. A half with no rows is
// skipped; only rows < n_rows are written.
template <int J>
void ScoresGroupTile(const uint8_t* group, int n_rows, int64_t nb, const int8_t* const* x,
                     const float* const* dx, float* y, int64_t y_stride, const uint8_t* ahead, size_t ahead_bytes) {
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const int halves = n_rows > 8 ? 2 : 1;
  const size_t ahead_step = (ahead_bytes / 64 / static_cast<size_t>(nb) + 1) * 64;
  const uint16_t* scales = reinterpret_cast<const uint16_t*>(group);
  const uint8_t* quants = group + static_cast<size_t>(nb) * 32;
  __m256 acc[2][J];
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) acc[h][j] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    for (size_t off = b * ahead_step; off < ahead_bytes && off < (b + 1) * ahead_step; off += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead + off), _MM_HINT_T2);  // into L2 (BlockPrefetch)
    }
    for (int h = 0; h < halves; ++h) {
      __m256i isum[J];
#pragma GCC unroll 8
      for (int kk = 0; kk < 8; ++kk) {
        const __m256i w = _mm256_xor_si256(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quants + b * 512 + kk * 64 + 32 * h)), flip);
        const __m256i mag = _mm256_abs_epi8(w);
#pragma GCC unroll 4
        for (int j = 0; j < J; ++j) {
          const __m256i xs = Slice(x[j] + 32 * b + 4 * kk);
          const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(mag, _mm256_sign_epi8(xs, w)), ones);
          isum[j] = kk == 0 ? dot : _mm256_add_epi32(isum[j], dot);
          asm("" : "+x"(isum[j]));  // a chain in registers, as HalfTile's
        }
      }
      const __m256 dw =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 16 * b + 8 * h)));
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) {
        acc[h][j] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_mul_ps(dw, _mm256_set1_ps(dx[j][b])), acc[h][j]);
      }
    }
  }
  for (int h = 0; h < halves; ++h) {
    const int lanes = n_rows - 8 * h < 8 ? n_rows - 8 * h : 8;
    for (int j = 0; j < J; ++j) {
      float* out = y + j * y_stride + 8 * h;
      if (lanes == 8) {
        _mm256_storeu_ps(out, acc[h][j]);
      } else {
        _mm256_maskstore_ps(out, LaneMask(0, lanes), acc[h][j]);
      }
    }
  }
}

void ScoresGroupAvx2(const uint8_t* group, int n_rows, int64_t head_dim, const uint8_t* queries,
                     size_t query_bytes, size_t scales_offset, int nq, float* scores, int64_t stride,
                     const uint8_t* ahead, size_t ahead_bytes) {
  if (n_rows <= 0 || nq <= 0) return;
  const int8_t* x[kScoresQ8_0GroupMaxQueries];
  const float* dx[kScoresQ8_0GroupMaxQueries];
  for (int j = 0; j < nq; ++j) {
    x[j] = reinterpret_cast<const int8_t*>(queries + static_cast<size_t>(j) * query_bytes);
    dx[j] = reinterpret_cast<const float*>(queries + static_cast<size_t>(j) * query_bytes + scales_offset);
  }
  const int64_t nb = head_dim / 32;
  switch (nq) {
    case 1: return ScoresGroupTile<1>(group, n_rows, nb, x, dx, scores, stride, ahead, ahead_bytes);
    case 2: return ScoresGroupTile<2>(group, n_rows, nb, x, dx, scores, stride, ahead, ahead_bytes);
    case 3: return ScoresGroupTile<3>(group, n_rows, nb, x, dx, scores, stride, ahead, ahead_bytes);
    default: return ScoresGroupTile<4>(group, n_rows, nb, x, dx, scores, stride, ahead, ahead_bytes);
  }
}

}  // namespace

void FillAvx2PackedQ8_0(KernelTable* t) {
  t->pack_q8_0_group = PackGroupAvx2;
  t->scores_q8_0_group = ScoresGroupAvx2;
  t->pack_q8_0 = true;
  t->packed_q8_0 = MatmulAvx2;
  t->packed_q8_0_wide = MatmulAvx2;
}

}  // namespace kvs::kernel_table
