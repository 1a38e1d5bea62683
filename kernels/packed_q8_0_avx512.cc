// Packed Q8_0 x Q8_0 activations on AVX-512 VNNI (see packed_q8_0.h for
// the layout and the arithmetic every kernel shares bit for bit).
//
// The 16 lanes of a register are the 16 weight rows of a group: eight
// VPDPBUSD of the block's quant tile against a broadcast 4-byte slice of
// the activation block give the 16 exact block sums at once (weights are
// stored as q + 128, so each block's sums start from -128 * sum(x)).
// Five or more activation rows take two groups a tile: each slice is
// broadcast once into a register for both groups' products, and the tile
// has twice the chains (GroupTile; on Zen 5 prefill's GEMM took 0.8x the
// time). A call of 1 to 4 rows (decode, reading from memory) takes one
// group at a time, the slice VPDPBUSD's embedded-broadcast operand
// (DotSlice: with a separate broadcast per product and one group a tile,
// 8-row calls from memory ran 1.14x and from cache 1.07x the time,
// gemm_packed nx8, Sapphire Rapids), and asks for each group's scales as
// it starts (AskForGroupScales). A one-pass call of 5 to 8 rows (fan-out's steps, whose
// weights come from memory once) takes one group and all its rows a
// tile, each slice broadcast once for 8 products: every weight register
// is loaded once per group instead of once per 4-row tile, and on Zen 5
// an 8-row pass from memory took 0.83-0.87x the time of two-group 4-row
// tiles (from cache 1.1x; fan-out's step 0.9x).
//
// ScoresGroupAvx512 (the table's scores_q8_0_group) is the same arithmetic
// for a decode row's few queries against one key group of a q8_0 cache,
// which holds its keys in this layout (q8_0_kv_blocks.h).
// GCC 12 flags its own intrinsics (intentionally undefined pass-through
// operands) as maybe-uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/attention_q8_0_scores.h"
#include "kernels/kernel_table.h"
#include "kernels/kv_dtype.h"
#include "kernels/packed_q8_0.h"
#include "kernels/packed_q8_0_group.h"

namespace kvs::kernel_table {
namespace {

constexpr int kMaxBlocks = 1024;  // cols <= 32768 (wider falls back to scalar)
constexpr int kXChunk = 16;       // activation rows whose block sums are kept
constexpr int kXTile = 4;         // activation rows per register tile (two groups a tile)
constexpr int kOnePassTile = 8;   // rows per tile of a one-pass call (one group a tile)
constexpr int64_t kGroupsAhead = 4;  // groups ahead a many-row pass asks for lines

// -128 times the sum of each 32-block of activation quants: what the
// weights' + 128 adds to a block's sum, taken off by starting from it.
// From the row's int16 sums of each 16 quants, which follow its scales
// (packed_q8_0.h): one VPMADDWD for 16 blocks.
void BlockCorrections(const int16_t* sums, int64_t nb, int32_t* out) {
  const __m512i minus_128 = _mm512_set1_epi16(-128);
  for (int64_t b = 0; b < nb; b += 16) {
    const int64_t n = nb - b < 16 ? nb - b : 16;
    const __mmask32 pairs = n == 16 ? ~__mmask32{0} : (__mmask32{1} << (2 * n)) - 1;
    const __m512i s = _mm512_maskz_loadu_epi16(pairs, sums + 2 * b);
    _mm512_mask_storeu_epi32(out + b, static_cast<__mmask16>((1u << n) - 1), _mm512_madd_epi16(s, minus_128));
  }
}

// The sums of activation row x (quants, then nb F32 scales at
// x + scales_offset, then the sums).
const int16_t* RowSums(const uint8_t* x, size_t scales_offset, int64_t nb) {
  return reinterpret_cast<const int16_t*>(x + scales_offset + sizeof(float) * nb);
}

// chain += w (unsigned bytes) . the 4 signed activation bytes at `slice`,
// broadcast: VPDPBUSD with an embedded broadcast, one fused load and
// multiply. (GCC 12 keeps _mm512_set1_epi32 of a loaded slice as a
// separate VPBROADCASTD: one more uop per product.) Inline assembly, so
// ASan does not check this load; the kernel tests compare every value
// with the scalar reference's.
inline void DotSlice(__m512i& chain, __m512i w, const uint8_t* slice) {
  __m512i acc = chain;  // (a copy, as in DotSlices)
  asm("vpdpbusd %[slice]%{1to16%}, %[w], %[acc]"
      : [acc] "+v"(acc)
      : [w] "v"(w), [slice] "m"(*reinterpret_cast<const int32_t*>(slice)));
  chain = acc;
}

// DotSlice for J queries (2 to 4) in one statement, their products in
// query order: chain[j][c] += w . the slice at x + j * x_stride.
template <int J, int kChains>
inline void DotSlices(__m512i (&chain)[J][kChains], int c, __m512i w, const uint8_t* x, size_t x_stride) {
  const int32_t* s0 = reinterpret_cast<const int32_t*>(x);
  const int32_t* s1 = reinterpret_cast<const int32_t*>(x + x_stride);
  // The asm works on copies: with the array's elements as its operands,
  // GCC 12 kept the array on the stack and stored every chain after each
  // product (51 stores in ScoresGroupAvx512); with the copies a warm
  // decode group of two queries takes 0.92-0.97x the time
  // (docs/performance/intel-xeon-amx.md, "Where a decode row's time goes
  // at 16,384, a score kernel's stack stores"). The same products in
  // the same order: no bit changes.
  __m512i a0 = chain[0][c], a1 = chain[1][c];
  if constexpr (J == 2) {
    asm("vpdpbusd %[s0]%{1to16%}, %[w], %[a0]\n\t"
        "vpdpbusd %[s1]%{1to16%}, %[w], %[a1]"
        : [a0] "+v"(a0), [a1] "+v"(a1)
        : [w] "v"(w), [s0] "m"(*s0), [s1] "m"(*s1));
  } else {
    const int32_t* s2 = reinterpret_cast<const int32_t*>(x + 2 * x_stride);
    __m512i a2 = chain[2][c];
    if constexpr (J == 3) {
      asm("vpdpbusd %[s0]%{1to16%}, %[w], %[a0]\n\t"
          "vpdpbusd %[s1]%{1to16%}, %[w], %[a1]\n\t"
          "vpdpbusd %[s2]%{1to16%}, %[w], %[a2]"
          : [a0] "+v"(a0), [a1] "+v"(a1), [a2] "+v"(a2)
          : [w] "v"(w), [s0] "m"(*s0), [s1] "m"(*s1), [s2] "m"(*s2));
    } else {
      static_assert(J == 4);
      const int32_t* s3 = reinterpret_cast<const int32_t*>(x + 3 * x_stride);
      __m512i a3 = chain[3][c];
      asm("vpdpbusd %[s0]%{1to16%}, %[w], %[a0]\n\t"
          "vpdpbusd %[s1]%{1to16%}, %[w], %[a1]\n\t"
          "vpdpbusd %[s2]%{1to16%}, %[w], %[a2]\n\t"
          "vpdpbusd %[s3]%{1to16%}, %[w], %[a3]"
          : [a0] "+v"(a0), [a1] "+v"(a1), [a2] "+v"(a2), [a3] "+v"(a3)
          : [w] "v"(w), [s0] "m"(*s0), [s1] "m"(*s1), [s2] "m"(*s2), [s3] "m"(*s3));
      chain[3][c] = a3;
    }
    chain[2][c] = a2;
  }
  chain[0][c] = a0;
  chain[1][c] = a1;
}

// Weight tile slices outermost and activation rows innermost, so the J
// rows' VPDPBUSD chains interleave (one chain is bound by the instruction's
// latency); a single row of a single group splits its block into two
// chains. The tile covers G consecutive groups (1 or 2, group_bytes
// apart) with the same activation rows:
// - G = 1, J <= 4: each product's slice is VPDPBUSD's embedded broadcast
//   (DotSlice).
// - G = 1, J of 5 to 8 (a one-pass call's tile): each slice is broadcast
//   once into a register for the J products, J chains.
// - G = 2: each slice is broadcast once into a register that both
//   groups' products use, so the tile has 2 x J chains. On Zen 5 the
//   embedded broadcasts held a 4-row tile to one VPDPBUSD a cycle
//   (its 4 chains of 8 latency-4 products a block), and 2 x 4 chains
//   with shared broadcasts ran 1.7x that (docs/performance/zen5.md, "Two
//   groups a tile").
// Each group's sums and F32 steps are the G = 1 ones, so the bits do not
// depend on G.
// Activation row j is at x + j * x_stride (quants; its F32 scales at +
// scales_offset), its block corrections at corr + j * kMaxBlocks: one base
// pointer each, so the rows' addresses need no registers of their own
// (with a pointer per row, GCC kept some in vector registers and moved
// them back for every block). Block b asks for the lines [ahead + b *
// ahead_step, ahead + (b + 1) * ahead_step) (ahead_step 0: none), into L1
// or, with kToL2, into L2 only.
// Inlined: out of line (as 7e202da had it) prefill's 512-row GEMM ran
// 1.10x slower (gemm_packed nx512/3072x1024).
template <int G, int J, bool kToL2>
inline void GroupTile(const uint8_t* group, size_t group_bytes, int64_t nb, const uint8_t* x, size_t x_stride,
                      size_t scales_offset, const int32_t* corr, const uint8_t* ahead, size_t ahead_step,
                      __m512 (&acc)[G][J]) {
  static_assert(G == 1 || G == 2);
  static_assert(J <= (G == 1 ? kOnePassTile : kXTile));
  constexpr int kChains = G == 1 && J == 1 ? 2 : 1;
  const size_t quants_offset = ScalesBytes(nb);
  const float* dx = reinterpret_cast<const float*>(x + scales_offset);
  const size_t dx_stride = x_stride / sizeof(float);  // x_stride % 4 == 0 (MatmulAvx512)
#pragma GCC unroll 2
  for (int g = 0; g < G; ++g) {
#pragma GCC unroll 8
    for (int j = 0; j < J; ++j) acc[g][j] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    __m512i p[G][J][kChains];
#pragma GCC unroll 8
    for (int j = 0; j < J; ++j) {
      const __m512i c = _mm512_set1_epi32(corr[j * kMaxBlocks + b]);
#pragma GCC unroll 2
      for (int g = 0; g < G; ++g) {
        p[g][j][0] = c;
        if constexpr (kChains == 2) p[g][j][1] = _mm512_setzero_si512();
      }
    }
    for (size_t line = 0; line < ahead_step; line += 64) {
      const char* at = reinterpret_cast<const char*>(ahead + b * ahead_step + line);
      if constexpr (kToL2) {
        _mm_prefetch(at, _MM_HINT_T1);
      } else {
        _mm_prefetch(at, _MM_HINT_T0);
      }
    }
#pragma GCC unroll 8
    for (int kk = 0; kk < 8; ++kk) {
      __m512i w[G];
#pragma GCC unroll 2
      for (int g = 0; g < G; ++g) {
        w[g] = _mm512_loadu_si512(group + g * group_bytes + quants_offset + b * 512 + kk * 64);
      }
#pragma GCC unroll 8
      for (int j = 0; j < J; ++j) {
        const uint8_t* slice = x + j * x_stride + 32 * b + 4 * kk;
        if constexpr (G == 1 && J <= kXTile) {
          DotSlice(p[0][j][kk % kChains], w[0], slice);
        } else {
          const __m512i s = _mm512_set1_epi32(*reinterpret_cast<const int32_t*>(slice));
#pragma GCC unroll 2
          for (int g = 0; g < G; ++g) p[g][j][0] = _mm512_dpbusd_epi32(p[g][j][0], w[g], s);
        }
      }
    }
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) {
      const uint16_t* scales = reinterpret_cast<const uint16_t*>(group + g * group_bytes);
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + 16 * b)));
#pragma GCC unroll 8
      for (int j = 0; j < J; ++j) {
        __m512i isum = p[g][j][0];
        if constexpr (kChains == 2) isum = _mm512_add_epi32(isum, p[g][j][1]);
        acc[g][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                    _mm512_mul_ps(dw, _mm512_set1_ps(dx[j * dx_stride + b])), acc[g][j]);
      }
    }
  }
}

// GroupTile<G, t> for a run-time t in [1, kXTile] (G = 2) or [1,
// kOnePassTile] (G = 1): acc[g][j] for the tile's G groups and t rows.
template <int G, int J = G == 1 ? kOnePassTile : kXTile>
void Dispatch(int t, const uint8_t* group, size_t group_bytes, int64_t nb, const uint8_t* x, size_t x_stride,
              size_t scales_offset, const int32_t* corr, const uint8_t* ahead, size_t ahead_step, bool to_l2,
              __m512 (&acc)[2][kOnePassTile]) {
  if constexpr (J > 1) {
    if (t < J) {
      return Dispatch<G, J - 1>(t, group, group_bytes, nb, x, x_stride, scales_offset, corr, ahead, ahead_step,
                                to_l2, acc);
    }
  }
  __m512 a[G][J];
  if (to_l2) {
    GroupTile<G, J, true>(group, group_bytes, nb, x, x_stride, scales_offset, corr, ahead, ahead_step, a);
  } else {
    GroupTile<G, J, false>(group, group_bytes, nb, x, x_stride, scales_offset, corr, ahead, ahead_step, a);
  }
  for (int g = 0; g < G; ++g) {
    for (int j = 0; j < J; ++j) acc[g][j] = a[g][j];
  }
}

// A one-pass call (5 to kXChunk rows) that starts a thread's run asks for
// its first kGroupsAhead groups only as it starts, and every call costs a
// little (block sums, the asking again): 64-row calls one after another
// took 1.3x the time of 192-row ones, and 1.15x when each was told the
// next follows (gemm_packed nx8/151936x1024/tasks64 against /tasks192, and
// their /ahead cases; Zen 4).
int64_t MinCallRows(int nx) { return nx > kXTile && nx <= kXChunk ? 192 : 16; }

void MatmulAvx512(const uint8_t* packed, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
                  const uint8_t* xq, size_t x_row_bytes, size_t scales_offset, int nx, float* y,
                  int64_t y_stride, int64_t ask_end, bool asked) {
  const int64_t nb = cols / 32;
  // Rows of quants and F32 scales are whole floats apart (ActivationBytes:
  // cols + 4 * cols / 32), which GroupTile's one scale pointer needs.
  if (nb > kMaxBlocks || x_row_bytes % sizeof(float) != 0) {
    return MatmulPackedQ8_0Scalar(packed, rows, cols, r0, r1, xq, x_row_bytes, scales_offset, nx, y,
                                  y_stride);
  }
  if (r1 > rows) r1 = rows;
  if (ask_end > rows) ask_end = rows;
  const size_t group_bytes = PackedQ8_0GroupBytes(cols);
  alignas(64) int32_t corr[kXChunk][kMaxBlocks];
  for (int j0 = 0; j0 < nx; j0 += kXChunk) {
    const int chunk = nx - j0 < kXChunk ? nx - j0 : kXChunk;
    const uint8_t* x = xq + static_cast<size_t>(j0) * x_row_bytes;
    for (int j = 0; j < chunk; ++j) {
      BlockCorrections(RowSums(x + j * x_row_bytes, scales_offset, nb), nb, corr[j]);
    }
    const int64_t g_last = (r1 + 15) / 16;  // one past the range's last group
    // A call of one chunk of 5 to 16 rows (fan-out) reads its weights
    // once, from memory: one pass. Up to 8 rows, it takes one tile of one
    // group (more rows are arithmetic enough that two-group tiles, faster
    // from cache, win: 16 forks' steps took 1.03x the time in 8-row tiles).
    const bool one_pass = chunk > kXTile && nx <= kXChunk;
    const bool one_tile = one_pass && chunk <= kOnePassTile;
    const int tile_rows = one_tile ? kOnePassTile : kXTile;
    const int tiles = (chunk + tile_rows - 1) / tile_rows;
    for (int64_t g = r0 / 16; g < g_last;) {
      // Two groups a tile (GroupTile) for five or more rows while two are
      // left; a call of 1 to 4 rows (decode steps, their weights from
      // memory) and a one-pass call of up to 8 rows (one tile) take one at
      // a time. A two-group tile of 2 to 4 rows read two streams of quants
      // a group apart and two of scales; one group at a time with its
      // scales asked for (AskForGroupScales) took 0.56-0.73x the time from
      // memory (gemm_packed nx2 and nx4/151936x1024, Zen 4).
      const bool few_rows = nx <= kXTile;
      const int n_groups = !one_tile && !few_rows && chunk >= 2 && g + 1 < g_last ? 2 : 1;
      const uint8_t* group = packed + g * group_bytes;
      // A many-row chunk's tiles share out the asking for the lines of the
      // group kGroupsAhead on, a slice per block, so memory is read while
      // every tile computes: one tile asking for all of it left memory
      // idle through the other tiles, and the time of a pass from memory
      // was its read plus its arithmetic.
      // A call of one chunk (5 to 16 rows: fan-out) reads its weights once,
      // from memory. Its tiles ask for L2 only (T1): on Zen 4, asking for
      // L1 (T0) left an 8-row pass from memory at its read plus its
      // arithmetic, 1.8x the time (each L1 request holds one of the core's
      // few L1 miss buffers until its line arrives). And its range starts
      // by asking for every group up to the one kGroupsAhead on, so a short
      // range (an engine task of 4 to 12 groups) is not read on demand.
      // Prefill's passes (more rows: the weights come from cache after the
      // first chunk) keep L1 and start cold.
      // A call of 1 to 4 rows, and a pass's last chunk of one row, ask only
      // for the group's scales (AskForGroupScales).
      // A one-pass call asks past the range up to `ask_end`, the rows this
      // thread computes next, so its stream of calls does not stop and
      // start again at every call's end (a one-pass call of 192 rows after
      // another on one thread took 1.4x the time of one call over both
      // without it, 1.1x with it). A call the previous one asked for
      // (`asked`) skips the start's asking: its first groups' lines are
      // on their way, and asking for them again took 7% of a run of
      // 64-row calls and 3% of one of 192-row calls (gemm_packed
      // nx8/151936x1024/tasks64/ahead and /tasks192/ahead, Zen 5): it then
      // runs as the middle of one call.
      // Prefill's passes never ask past their range: their first chunk
      // alone reads from memory.
      // A tile of two groups asks for two groups' lines, so the asking
      // keeps kGroupsAhead groups ahead of the groups being computed.
      const int64_t groups_ahead = chunk > kXTile ? kGroupsAhead : 0;
      const bool starts_stream = g == r0 / 16 && !asked;  // nothing of the range asked for yet
      const int64_t ask_from = one_pass && starts_stream ? g + n_groups : g + groups_ahead;
      int64_t ask_groups = one_pass && starts_stream ? groups_ahead : n_groups;
      const int64_t g_end = (one_pass && ask_end > r1 ? ask_end + 15 : r1 + 15) / 16;
      if (ask_from + ask_groups > g_end) ask_groups = g_end - ask_from;
      const bool ask = groups_ahead > 0 && ask_groups > 0;
      const size_t ahead_step = ask ? (ask_groups * group_bytes / (tiles * nb) + 63) / 64 * 64 : 0;
      if (few_rows || chunk == 1) AskForGroupScales(group, nb);
      for (int jt = 0; jt < chunk; jt += tile_rows) {
        const int t = chunk - jt < tile_rows ? chunk - jt : tile_rows;
        __m512 acc[2][kOnePassTile];
        const uint8_t* ahead = ask ? packed + ask_from * group_bytes + (jt / tile_rows) * nb * ahead_step : group;
        if (n_groups == 2) {
          Dispatch<2>(t, group, group_bytes, nb, x + jt * x_row_bytes, x_row_bytes, scales_offset, corr[jt], ahead,
                      ahead_step, /*to_l2=*/one_pass, acc);
        } else {
          Dispatch<1>(t, group, group_bytes, nb, x + jt * x_row_bytes, x_row_bytes, scales_offset, corr[jt], ahead,
                      ahead_step, /*to_l2=*/one_pass, acc);
        }
        for (int gi = 0; gi < n_groups; ++gi) {
          // Lanes of group g + gi inside [r0, r1).
          const int64_t g16 = 16 * (g + gi);
          const int64_t lo = r0 > g16 ? r0 - g16 : 0;
          const int64_t hi = r1 < g16 + 16 ? r1 - g16 : 16;
          const __mmask16 mask = static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
          for (int j = 0; j < t; ++j) {
            _mm512_mask_storeu_ps(y + static_cast<int64_t>(j0 + jt + j) * y_stride + g16, mask, acc[gi][j]);
          }
        }
      }
      g += n_groups;
    }
  }
}

// Block b's quants of the group's 16 rows (`at` = b * 34 + 2 bytes into
// each row), plus 128, as the packed layout's 8 slice registers: the 16
// rows' 32 quants are a 16 x 8 matrix of 4-byte slices, transposed so that
// slice kk of every row lies in w[kk], row n in lane n. Rows n and n + 8
// share a register as they are loaded (low and high 256 bits), so one 8 x
// 8 transpose inside each half (unpacks of 32 and 64 bits, then 128-bit
// lanes picked across two registers) puts rows 0-7 in the low half of
// slice kk's register and rows 8-15 in the high half. Rows from n_rows on
// are zero quants (128 in w).
__attribute__((always_inline)) inline void TransposeBlock(const uint8_t* const* rows, int n_rows, size_t at,
                                                          __m512i (&w)[8]) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i even = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i odd = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  auto quants_of = [&](int n) {
    return n < n_rows ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[n] + at)) : _mm256_setzero_si256();
  };
  __m512i z[8];
#pragma GCC unroll 8
  for (int n = 0; n < 8; ++n) {
    z[n] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(quants_of(n)), quants_of(n + 8), 1), flip);
  }
  __m512i t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm512_unpacklo_epi32(z[i], z[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(z[i], z[i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // u[c] (c < 4), 128-bit lanes 0-3: slice c of rows 0-3, slice c + 4 of
  // rows 0-3, slice c of rows 8-11, slice c + 4 of rows 8-11; u[c + 4]
  // the same for rows 4-7 and 12-15.
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    w[c] = _mm512_permutex2var_epi64(u[c], even, u[c + 4]);
    w[c + 4] = _mm512_permutex2var_epi64(u[c], odd, u[c + 4]);
  }
}

// Block b's lines of the span asked for ahead: its share, whole lines,
// into L2 (BlockPrefetch).
inline void AskAhead(const uint8_t* ahead, size_t ahead_bytes, size_t ahead_step, int64_t b) {
  for (size_t off = b * ahead_step; off < ahead_bytes && off < (b + 1) * ahead_step; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(ahead + off), _MM_HINT_T2);
  }
}

// PackQ8_0Group: per block, TransposeBlock's slice registers stored in
// order, then the rows' F16 scales. Missing rows are zero quants (stored
// as 128) with scale 0, as PackQ8_0GroupScalar.
void PackGroupAvx512(const uint8_t* const* rows, int n_rows, int64_t cols, uint8_t* out, const uint8_t* ahead,
                     size_t ahead_bytes) {
  const int64_t nb = cols / 32;
  if (nb > kMaxBlocks) return PackQ8_0GroupScalar(rows, n_rows, cols, out, ahead, ahead_bytes);
  uint16_t* scales = reinterpret_cast<uint16_t*>(out);
  uint8_t* quants = out + ScalesBytes(nb);
  std::memset(out, 0, ScalesBytes(nb));
  const size_t ahead_step = (ahead_bytes / 64 / static_cast<size_t>(nb) + 1) * 64;
  for (int64_t b = 0; b < nb; ++b) {
    const size_t at = static_cast<size_t>(b) * 34;  // the block's scale; its quants 2 bytes on
    AskAhead(ahead, ahead_bytes, ahead_step, b);
    __m512i w[8];
    TransposeBlock(rows, n_rows, at + 2, w);
    uint8_t* wq = quants + b * 512;
#pragma GCC unroll 8
    for (int kk = 0; kk < 8; ++kk) _mm512_storeu_si512(wq + kk * 64, w[kk]);
    for (int n = 0; n < n_rows; ++n) std::memcpy(scales + b * 16 + n, rows[n] + at, 2);
  }
}

// Blocks of a head ScoresGroupAvx512 takes: every head a q8_0 cache holds
// (longer heads, which no cache has, go to the scalar kernel: the same
// bits).
constexpr int64_t kMaxGroupBlocks = 32;
static_assert(kMaxGroupBlocks * 32 >= kKvQ8_0MaxHeadDim, "every q8_0 cache's head");

// The scores of one key group (q8_0_kv_blocks.h: scales [nb][16], then
// the quants as q + 128 in the packed order, nb * 32 bytes in) for J
// queries: GroupTile's products (VPDPBUSD chains from the block's
// correction, the same exact int32 sums) and its scaled sums (fma(float(isum),
// d_k * d_x, acc), blocks in order), so every lane has MatmulAvx512's
// bits for that key and query. Each block's 16 scales and 8 slice
// registers are plain loads: no gather, no transposition (a decode row
// from memory took 0.84x the time of the rows' gathers and transposition,
// docs/performance/zen5.md, "Q8_0 pages with the keys packed"). While a
// block is folded it asks for its share of [ahead, ahead + ahead_bytes)
// into L2. Only rows < n_rows are written.
template <int J>
void ScoresGroupTile(const uint8_t* group, int n_rows, int64_t nb, const uint8_t* x, size_t x_stride,
                     size_t scales_offset, float* y, int64_t y_stride, const uint8_t* ahead, size_t ahead_bytes) {
  int32_t corr[J][kMaxGroupBlocks];
#pragma GCC unroll 4
  for (int j = 0; j < J; ++j) BlockCorrections(RowSums(x + j * x_stride, scales_offset, nb), nb, corr[j]);
  const __mmask16 present = static_cast<__mmask16>(n_rows >= 16 ? 0xFFFF : (1u << n_rows) - 1);
  const size_t ahead_step = (ahead_bytes / 64 / static_cast<size_t>(nb) + 1) * 64;
  const uint16_t* scales = reinterpret_cast<const uint16_t*>(group);
  const uint8_t* quants = group + static_cast<size_t>(nb) * 32;
  __m512 acc[J];
#pragma GCC unroll 4
  for (int j = 0; j < J; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    AskAhead(ahead, ahead_bytes, ahead_step, b);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + 16 * b)));
    // The queries' chains side by side, slice by slice, in one asm
    // statement each (DotSlices); one or two queries split a block into
    // two chains each.
    constexpr int kChains = J <= 2 ? 2 : 1;
    __m512i p[J][kChains];
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) {
      p[j][0] = _mm512_set1_epi32(corr[j][b]);
      if constexpr (kChains == 2) p[j][1] = _mm512_setzero_si512();
    }
    const uint8_t* xb = x + 32 * b;
#pragma GCC unroll 8
    for (int kk = 0; kk < 8; ++kk) {
      const __m512i w = _mm512_loadu_si512(quants + b * 512 + kk * 64);
      if constexpr (J == 1) {
        DotSlice(p[0][kk % 2], w, xb + 4 * kk);
      } else {
        DotSlices<J>(p, kk % kChains, w, xb + 4 * kk, x_stride);
      }
    }
    if constexpr (kChains == 2) {
#pragma GCC unroll 2
      for (int j = 0; j < J; ++j) p[j][0] = _mm512_add_epi32(p[j][0], p[j][1]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) {
      const float dx = reinterpret_cast<const float*>(x + j * x_stride + scales_offset)[b];
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[j][0]), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc[j]);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < J; ++j) _mm512_mask_storeu_ps(y + j * y_stride, present, acc[j]);
}

void ScoresGroupAvx512(const uint8_t* group, int n_rows, int64_t head_dim, const uint8_t* queries,
                       size_t query_bytes, size_t scales_offset, int nq, float* scores, int64_t stride,
                       const uint8_t* ahead, size_t ahead_bytes) {
  if (n_rows <= 0 || nq <= 0) return;
  const int64_t nb = head_dim / 32;
  if (nb > kMaxGroupBlocks) return ScoresQ8_0GroupScalar(group, n_rows, head_dim, queries, query_bytes,
                                                         scales_offset, nq, scores, stride, ahead, ahead_bytes);
  auto tile = [&](auto j) {
    ScoresGroupTile<decltype(j)::value>(group, n_rows, nb, queries, query_bytes, scales_offset, scores, stride,
                                        ahead, ahead_bytes);
  };
  switch (nq) {
    case 1: return tile(std::integral_constant<int, 1>{});
    case 2: return tile(std::integral_constant<int, 2>{});
    case 3: return tile(std::integral_constant<int, 3>{});
    default: return tile(std::integral_constant<int, 4>{});
  }
}

}  // namespace

void FillAvx512PackedQ8_0(KernelTable* t) {
  t->pack_q8_0_group = PackGroupAvx512;
  t->scores_q8_0_group = ScoresGroupAvx512;
  t->pack_q8_0 = true;
  t->packed_q8_0 = MatmulAvx512;
  t->packed_q8_0_wide = MatmulAvx512;
  t->packed_q8_0_min_call_rows = MinCallRows;
}

}  // namespace kvs::kernel_table
