// AVX-512 (VNNI) integer kernels of the fast path: weights in Q8_0/Q4_0
// against activations quantized to 32-value int8 blocks, and Q4_K/Q6_K
// against 256-value int8 blocks with 16-value sums (layouts in
// matmul_quantized.cc). Integer dot products are exact; each pair of
// 32-blocks (Q8_0/Q4_0) or each 256-block (Q4_K/Q6_K) adds
// scale * float(integer lane sums) into one 16-lane F32 accumulator per
// (weight row, activation row), the same sequence in GEMV and GEMM tiles.
#include "kernels/kernel_table.h"
#include "kernels/simd_avx512.h"
#include "kernels/simd_matmul.h"

namespace kvs {
namespace {

__m512 SplitScales(float lo, float hi) {
  return _mm512_insertf32x8(_mm512_set1_ps(lo), _mm256_set1_ps(hi), 1);
}

// 32 bytes at p, or 64 when `pair`, zero-extended to 64.
__m512i LoadBlockBytes(const void* p, bool pair) {
  return pair ? _mm512_loadu_si512(p)
              : _mm512_zextsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
}

// Tile shapes of the integer kernels (measured on Sapphire Rapids): 4
// weight rows for GEMV; for GEMM, 2 x 6 for the 32-blocks and 1 x 8 for the
// K-quants, whose dot products are heavier per weight row.
template <int kRows, int kCols>
struct IntTiles {
  static constexpr int kGemvRows = 4;
  static constexpr int kGemmRows = kRows;
  static constexpr int kGemmCols = kCols;
};

// Q8_0 x Q8_0, two blocks per step. vpdpbusd multiplies unsigned by signed
// bytes, so activations are offset by 128 and 128 * sum(w) is subtracted.
struct Q8_0Kernel : IntTiles<2, 6> {
  static int64_t Steps(int64_t cols) { return (cols / kQK8_0 + 1) / 2; }

  template <int R, int C>
  static void Step(const uint8_t* const* w, const QuantizedActRow* x, int64_t s, int64_t cols,
                   __m512 (&acc)[R][C]) {
    const int64_t b = 2 * s;
    const bool pair = b + 1 < cols / kQK8_0;
    const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512i wq[R], wcorr[R];
    __m512 wd[R];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const BlockQ8_0* blk = reinterpret_cast<const BlockQ8_0*>(w[i]) + b;
      const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[0].qs));
      const __m256i hi = pair ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[1].qs))
                              : _mm256_setzero_si256();
      wq[i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
      wcorr[i] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                  _mm512_dpbusd_epi32(_mm512_setzero_si512(), k128, wq[i]));
      wd[i] = SplitScales(Avx512::HalfToFloat(blk[0].d), pair ? Avx512::HalfToFloat(blk[1].d) : 0);
    }
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) {
      const __m512i xu = _mm512_xor_si512(LoadBlockBytes(x[j].q + b * kQK8_0, pair), k128);
      const __m512 xd = SplitScales(x[j].d[b], pair ? x[j].d[b + 1] : 0);
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        const __m512i sum = _mm512_dpbusd_epi32(wcorr[i], xu, wq[i]);
        acc[i][j] = _mm512_fmadd_ps(_mm512_mul_ps(wd[i], xd), _mm512_cvtepi32_ps(sum), acc[i][j]);
      }
    }
  }
};

// Q4_0 x Q8_0, two blocks per step: dot(nibble, x) - 8 * sum(x).
struct Q4_0Kernel : IntTiles<2, 6> {
  static int64_t Steps(int64_t cols) { return (cols / kQK4_0 + 1) / 2; }

  template <int R, int C>
  static void Step(const uint8_t* const* w, const QuantizedActRow* x, int64_t s, int64_t cols,
                   __m512 (&acc)[R][C]) {
    const int64_t b = 2 * s;
    const bool pair = b + 1 < cols / kQK4_0;
    // [block0 bytes, block0 bytes, block1 bytes, block1 bytes], the copies
    // shifted to expose the high nibbles.
    const __m512i spread = _mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3);
    const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    __m512i wq[R];
    __m512 wd[R];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const BlockQ4_0* blk = reinterpret_cast<const BlockQ4_0*>(w[i]) + b;
      const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[0].qs));
      const __m128i hi = pair ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[1].qs))
                              : _mm_setzero_si128();
      const __m512i both = _mm512_castsi256_si512(_mm256_set_m128i(hi, lo));
      wq[i] = _mm512_and_si512(_mm512_srlv_epi64(_mm512_permutexvar_epi64(spread, both), shifts),
                               _mm512_set1_epi8(0x0F));
      wd[i] = SplitScales(Avx512::HalfToFloat(blk[0].d), pair ? Avx512::HalfToFloat(blk[1].d) : 0);
    }
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) {
      const __m512i xq = LoadBlockBytes(x[j].q + b * kQK4_0, pair);
      const __m512i xcorr = _mm512_sub_epi32(
          _mm512_setzero_si512(),
          _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(8), xq));
      const __m512 xd = SplitScales(x[j].d[b], pair ? x[j].d[b + 1] : 0);
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        const __m512i sum = _mm512_dpbusd_epi32(xcorr, wq[i], xq);
        acc[i][j] = _mm512_fmadd_ps(_mm512_mul_ps(wd[i], xd), _mm512_cvtepi32_ps(sum), acc[i][j]);
      }
    }
  }
};

// 0..31: the index of each int16 lane of a vector.
alignas(64) const int16_t kLaneIndex[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                            11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                            22, 23, 24, 25, 26, 27, 28, 29, 30, 31};

// Q4_K x Q8_K, one 256-block per step:
//   d * dx * sum_s scale_s * dot(nibbles_s, x_s) - dmin * dx * sum_s min_s * sum(x_s).
struct Q4_KKernel : IntTiles<1, 8> {
  static int64_t Steps(int64_t cols) { return cols / kQK_K; }

  template <int R, int C>
  static void Step(const uint8_t* const* w, const QuantizedActRow* x, int64_t s, int64_t,
                   __m512 (&acc)[R][C]) {
    const BlockQ4_K* blk[R];
    __m512i scales[R];  // the 8 sub-block scales in int16 lanes 0..7
    __m256i mins[R];    // min of sub-block s in int16 lanes 2s and 2s+1
    __m512i isum[R][C];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      blk[i] = reinterpret_cast<const BlockQ4_K*>(w[i]) + s;
      alignas(16) uint8_t sc[16], m[16];
      UnpackQ4KScales(blk[i]->scales, sc, m);
      scales[i] = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc))));
      const __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(m)));
      mins[i] = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j) isum[i][j] = _mm512_setzero_si512();
    }
    const __m512i nibble_shift = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {  // sub-blocks 2g (low nibbles) and 2g+1 (high)
      // int16 lanes 0..15 take scale 2g, lanes 16..31 scale 2g+1.
      const __m512i scale_index = _mm512_add_epi16(_mm512_srli_epi16(_mm512_loadu_si512(kLaneIndex), 4),
                                                   _mm512_set1_epi16(static_cast<short>(2 * g)));
      __m512i wq[R], sc[R];
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[i]->qs + 32 * g));
        wq[i] = _mm512_and_si512(
            _mm512_srlv_epi64(_mm512_inserti64x4(_mm512_castsi256_si512(v), v, 1), nibble_shift),
            _mm512_set1_epi8(0x0F));
        sc[i] = _mm512_permutexvar_epi16(scale_index, scales[i]);
      }
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j) {
        const __m512i xq = _mm512_loadu_si512(x[j].q + s * kQK_K + 64 * g);
#pragma GCC unroll 16
        for (int i = 0; i < R; ++i) {
          isum[i][j] = _mm512_dpwssd_epi32(isum[i][j], _mm512_maddubs_epi16(wq[i], xq), sc[i]);
        }
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const float d = Avx512::HalfToFloat(blk[i]->d), dmin = Avx512::HalfToFloat(blk[i]->dmin);
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j) {
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[j].sums + 16 * s));
        const __m512i msum = _mm512_zextsi256_si512(_mm256_madd_epi16(bsums, mins[i]));
        const float dx = x[j].d[s];
        acc[i][j] = _mm512_fmadd_ps(_mm512_set1_ps(dx * d), _mm512_cvtepi32_ps(isum[i][j]), acc[i][j]);
        acc[i][j] = _mm512_fmadd_ps(_mm512_set1_ps(-(dx * dmin)), _mm512_cvtepi32_ps(msum), acc[i][j]);
      }
    }
  }
};

struct Q6_KKernel : IntTiles<1, 8> {
  static int64_t Steps(int64_t cols) { return cols / kQK_K; }

  template <int R, int C>
  static void Step(const uint8_t* const* w, const QuantizedActRow* x, int64_t s, int64_t,
                   __m512 (&acc)[R][C]) {
    const BlockQ6_K* blk[R];
    __m256i scales[R];
    __m512i isum[R][C];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      blk[i] = reinterpret_cast<const BlockQ6_K*>(w[i]) + s;
      scales[i] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[i]->scales)));
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j) isum[i][j] = _mm512_setzero_si512();
    }
    // High bits of values 0..31 / 32..63 of a half (qh bits 0-1 / 2-3) and
    // of values 64..95 / 96..127 (bits 4-5 / 6-7), moved to bits 4-5.
    const __m512i hi_left = _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2);
    const __m512i hi_right = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {  // 64 values: sub-blocks 4c..4c+3
      const int half = c / 2;
      __m512i wq[R], sc[R];
      // int16 lane l covers values 2l, 2l+1 of the chunk: sub-block 4c + l / 8.
      const __m512i scale_index = _mm512_add_epi16(
          _mm512_srli_epi16(_mm512_loadu_si512(kLaneIndex), 3), _mm512_set1_epi16(static_cast<short>(4 * c)));
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        const __m512i ql = _mm512_loadu_si512(blk[i]->ql + 64 * half);
        const __m512i qh = _mm512_broadcast_i64x4(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[i]->qh + 32 * half)));
        const __m512i low = c % 2 == 0 ? ql : _mm512_srli_epi64(ql, 4);
        const __m512i high = c % 2 == 0 ? _mm512_sllv_epi64(qh, hi_left) : _mm512_srlv_epi64(qh, hi_right);
        wq[i] = _mm512_or_si512(_mm512_and_si512(low, _mm512_set1_epi8(0x0F)),
                                _mm512_and_si512(high, _mm512_set1_epi8(0x30)));
        sc[i] = _mm512_permutexvar_epi16(scale_index, _mm512_castsi256_si512(scales[i]));
      }
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j) {
        const __m512i xq = _mm512_loadu_si512(x[j].q + s * kQK_K + 64 * c);
#pragma GCC unroll 16
        for (int i = 0; i < R; ++i) {
          isum[i][j] = _mm512_dpwssd_epi32(isum[i][j], _mm512_maddubs_epi16(wq[i], xq), sc[i]);
        }
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const float d = Avx512::HalfToFloat(blk[i]->d);
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j) {
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[j].sums + 16 * s));
        const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(scales[i], bsums), 5);
        const __m512i sum = _mm512_sub_epi32(isum[i][j], _mm512_zextsi256_si512(corr));
        acc[i][j] = _mm512_fmadd_ps(_mm512_set1_ps(x[j].d[s] * d), _mm512_cvtepi32_ps(sum), acc[i][j]);
      }
    }
  }
};

// The lanes of each of m[0, 16) folded by Op (max or add, on F32 or int32
// lanes as the caller's Op reads them) into one vector, in the tree's
// order: lane 4k + j holds m[4j + k]'s (kTreeOrder puts them back).
template <class Op>
__m512 FoldSixteen(const __m512 (&m)[16], Op op) {
  __m512 a[8], b[4];
  for (int i = 0; i < 8; ++i) {  // m[2i] folded to 8 lanes (low half), m[2i + 1] (high half)
    a[i] = op(_mm512_shuffle_f32x4(m[2 * i], m[2 * i + 1], 0x44), _mm512_shuffle_f32x4(m[2 * i], m[2 * i + 1], 0xee));
  }
  for (int i = 0; i < 4; ++i) {  // 128-bit lane k: m[4i + k] folded to 4
    b[i] = op(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x88), _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xdd));
  }
  const __m512 d0 = op(_mm512_unpacklo_ps(b[0], b[1]), _mm512_unpackhi_ps(b[0], b[1]));
  const __m512 d1 = op(_mm512_unpacklo_ps(b[2], b[3]), _mm512_unpackhi_ps(b[2], b[3]));
  return op(_mm512_shuffle_ps(d0, d1, 0x44), _mm512_shuffle_ps(d0, d1, 0xee));
}

// FoldSixteen's lanes back in input order (lane b from lane 4 (b % 4) + b / 4).
inline __m512i TreeOrder() { return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15); }

// The int32 sums of each of v[0, 16)'s lanes, in order, as int16 (each sum
// is of 16 quants in [-127, 127]).
__m256i SumsOfSixteen(const __m512 (&v)[16]) {
  const __m512 folded = FoldSixteen(v, [](__m512 a, __m512 b) {
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
  });
  return _mm512_cvtepi32_epi16(_mm512_permutexvar_epi32(TreeOrder(), _mm512_castps_si512(folded)));
}

// n <= 16 blocks of 32 values at x: QuantizeInt8Avx512's arithmetic, the
// blocks' maxima, scales and multipliers 16 at a time (one reduction tree
// and one division instead of one per block); with `sums`, each 16
// quants' sum too, 16 of them per tree. Reads and writes only the n
// blocks' values, quants, scales and sums.
__attribute__((always_inline)) inline void QuantizeBlocks32(const float* x, int n, bool f16_scale, int8_t* q,
                                                             float* d, int16_t* sums) {
  const __m512 sign_off = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  __m512 m[16];
  for (int b = 0; b < 16; ++b) {
    m[b] = b < n ? _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(x + 32 * b), sign_off),
                                 _mm512_and_ps(_mm512_loadu_ps(x + 32 * b + 16), sign_off))
                 : _mm512_setzero_ps();
  }
  const __m512 max_abs =
      _mm512_permutexvar_ps(TreeOrder(), FoldSixteen(m, [](__m512 a, __m512 b) { return _mm512_max_ps(a, b); }));
  const __m512 scale = _mm512_div_ps(max_abs, _mm512_set1_ps(127.0f));
  const __mmask16 nonzero = _mm512_cmp_ps_mask(scale, _mm512_setzero_ps(), _CMP_NEQ_UQ);
  alignas(64) float inv[16];
  _mm512_store_ps(inv, _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(1.0f), scale));
  const __mmask16 blocks = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
  _mm512_mask_storeu_ps(
      d, blocks, f16_scale ? _mm512_cvtph_ps(_mm512_cvtps_ph(scale, _MM_FROUND_TO_NEAREST_INT)) : scale);
  for (int b0 = 0; b0 < n; b0 += 8) {  // 8 blocks: 16 vectors of quants, one tree of sums
    __m512 quants[16];
    for (int b = b0; b < b0 + 8; ++b) {
      if (b >= n) {
        quants[2 * (b - b0)] = quants[2 * (b - b0) + 1] = _mm512_setzero_ps();
        continue;
      }
      const __m512 vinv = _mm512_set1_ps(inv[b]);
      for (int i = 0; i < 32; i += 16) {
        __m512 v = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * b + i), vinv),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
        const __m512i iv = _mm512_cvtps_epi32(v);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b + i), _mm512_cvtepi32_epi8(iv));
        quants[2 * (b - b0) + i / 16] = _mm512_castsi512_ps(iv);
      }
    }
    if (sums != nullptr) {
      const int count = n - b0 < 8 ? 2 * (n - b0) : 16;  // sums of this tree's blocks
      _mm256_mask_storeu_epi16(sums + 2 * b0, static_cast<__mmask16>(count >= 16 ? 0xFFFF : (1u << count) - 1),
                               SumsOfSixteen(quants));
    }
  }
}

}  // namespace

namespace kernel_table {

// QuantizeInt8Blocks with 16 lanes; the same operations lane by lane
// (max, 1 / scale, multiply, round to nearest even, clamp), so the same bits.
// Blocks of 32 (Q8_0 activations and keys, with or without sums) go 16 at
// a time (QuantizeBlocks32), blocks of 256 one by one.
void QuantizeInt8Avx512(const float* x, int64_t cols, int block, bool f16_scale, int8_t* q,
                        float* d, int16_t* sums) {
  const __m512 sign_off = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  int64_t b = 0;
  if (block == 32) {
    int16_t* s = sums;
    for (; b + 16 <= cols / block; b += 16, x += 16 * block, q += 16 * block) {  // (n a constant: no lane checks)
      QuantizeBlocks32(x, 16, f16_scale, q, d + b, s != nullptr ? s + 2 * b : nullptr);
    }
    if (b < cols / block) {
      QuantizeBlocks32(x, static_cast<int>(cols / block - b), f16_scale, q, d + b, s != nullptr ? s + 2 * b : nullptr);
    }
    return;
  }
  for (; b < cols / block; ++b, x += block, q += block) {
    __m512 amax = _mm512_setzero_ps();
    for (int i = 0; i < block; i += 16) amax = _mm512_max_ps(amax, _mm512_and_ps(_mm512_loadu_ps(x + i), sign_off));
    const float max_abs = _mm512_reduce_max_ps(amax);
    const float scale = max_abs / 127.0f;
    const float inv = scale != 0 ? 1.0f / scale : 0.0f;
    d[b] = f16_scale ? _cvtsh_ss(_cvtss_sh(scale, _MM_FROUND_TO_NEAREST_INT)) : scale;
    const __m512 vinv = _mm512_set1_ps(inv);
    for (int i = 0; i < block; i += 16) {
      __m512 v = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vinv),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
      const __m128i bytes = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), bytes);
      if (sums != nullptr) {
        sums[b * (block / 16) + i / 16] =
            static_cast<int16_t>(_mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(bytes)));
      }
    }
  }
}

void FillAvx512MatmulQuantized(KernelTable* t) {
  t->quantize_int8 = QuantizeInt8Avx512;
  t->matmul_quantized[kQ8_0] = MatmulQuantizedWith<Avx512, Q8_0Kernel>;
  t->matmul_quantized[kQ4_0] = MatmulQuantizedWith<Avx512, Q4_0Kernel>;
  t->matmul_quantized[kQ4_K] = MatmulQuantizedWith<Avx512, Q4_KKernel>;
  t->matmul_quantized[kQ6_K] = MatmulQuantizedWith<Avx512, Q6_KKernel>;
}

}  // namespace kernel_table
}  // namespace kvs
