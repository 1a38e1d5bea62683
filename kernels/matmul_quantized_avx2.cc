// AVX2 integer kernels of the fast path (the AVX-512 file explains the
// arithmetic): one 32-value block per step for Q8_0/Q4_0, one 256-block
// for Q4_K/Q6_K, with maddubs/madd integer dot products (exact: no pair sum
// can saturate with activations in [-127, 127]) and one 8-lane F32
// accumulator per (weight row, activation row).
#include "kernels/kernel_table.h"
#include "kernels/simd_avx2.h"
#include "kernels/simd_matmul.h"

namespace kvs {
namespace {


// Sums of adjacent pairs of u8 * s8 products, widened to 8 int32 lanes.
__m256i DotU8S8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

__m256i LoadBytes(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

struct IntTiles {
  static constexpr int kGemvRows = 4;
  static constexpr int kGemmRows = 2;
  static constexpr int kGemmCols = 4;
};

// Q8_0 x Q8_0: dot(|w|, sign(x, w)).
struct Q8_0Kernel : IntTiles {
  static int64_t Steps(int64_t cols) { return cols / kQK8_0; }

  template <int R, int C>
  static void Step(const uint8_t* const* w, const QuantizedActRow* x, int64_t b, int64_t,
                   __m256 (&acc)[R][C]) {
    __m256i wq[R], wabs[R];
    float wd[R];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const BlockQ8_0* blk = reinterpret_cast<const BlockQ8_0*>(w[i]) + b;
      wq[i] = LoadBytes(blk->qs);
      wabs[i] = _mm256_abs_epi8(wq[i]);
      wd[i] = Avx2::HalfToFloat(blk->d);
    }
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) {
      const __m256i xq = LoadBytes(x[j].q + b * kQK8_0);
      const float xd = x[j].d[b];
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        const __m256i sum = DotU8S8(wabs[i], _mm256_sign_epi8(xq, wq[i]));
        acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(wd[i] * xd), _mm256_cvtepi32_ps(sum), acc[i][j]);
      }
    }
  }
};

// Q4_0 x Q8_0: dot(nibble, x) - 8 * sum(x).
struct Q4_0Kernel : IntTiles {
  static int64_t Steps(int64_t cols) { return cols / kQK4_0; }

  template <int R, int C>
  static void Step(const uint8_t* const* w, const QuantizedActRow* x, int64_t b, int64_t,
                   __m256 (&acc)[R][C]) {
    __m256i wq[R];
    float wd[R];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const BlockQ4_0* blk = reinterpret_cast<const BlockQ4_0*>(w[i]) + b;
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs));
      const __m128i low4 = _mm_set1_epi8(0x0F);
      wq[i] = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), low4), _mm_and_si128(v, low4));
      wd[i] = Avx2::HalfToFloat(blk->d);
    }
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) {
      const __m256i xq = LoadBytes(x[j].q + b * kQK4_0);
      const __m256i xcorr = DotU8S8(_mm256_set1_epi8(8), xq);
      const float xd = x[j].d[b];
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        const __m256i sum = _mm256_sub_epi32(DotU8S8(wq[i], xq), xcorr);
        acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(wd[i] * xd), _mm256_cvtepi32_ps(sum), acc[i][j]);
      }
    }
  }
};

// Q4_K x Q8_K (see the AVX-512 Q4_KKernel).
struct Q4_KKernel : IntTiles {
  static int64_t Steps(int64_t cols) { return cols / kQK_K; }

  template <int R, int C>
  static void Step(const uint8_t* const* w, const QuantizedActRow* x, int64_t s, int64_t,
                   __m256 (&acc)[R][C]) {
    const BlockQ4_K* blk[R];
    uint8_t scale[R][8], min[R][8];
    __m256i isum[R][C];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      blk[i] = reinterpret_cast<const BlockQ4_K*>(w[i]) + s;
      UnpackQ4KScales(blk[i]->scales, scale[i], min[i]);
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j) isum[i][j] = _mm256_setzero_si256();
    }
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {  // sub-blocks 2g (low nibbles) and 2g+1 (high)
      __m256i lo[R], hi[R];
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        const __m256i v = LoadBytes(blk[i]->qs + 32 * g);
        lo[i] = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
        hi[i] = _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
      }
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j) {
        const int8_t* xq = x[j].q + s * kQK_K + 64 * g;
        const __m256i x0 = LoadBytes(xq), x1 = LoadBytes(xq + 32);
#pragma GCC unroll 16
        for (int i = 0; i < R; ++i) {
          const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo[i], x0),
                                               _mm256_set1_epi16(scale[i][2 * g]));
          const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi[i], x1),
                                               _mm256_set1_epi16(scale[i][2 * g + 1]));
          isum[i][j] = _mm256_add_epi32(isum[i][j], _mm256_add_epi32(p0, p1));
        }
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const uint8_t* m = min[i];
      const __m256i mins = _mm256_setr_epi16(m[0], m[0], m[1], m[1], m[2], m[2], m[3], m[3], m[4],
                                             m[4], m[5], m[5], m[6], m[6], m[7], m[7]);
      const float d = Avx2::HalfToFloat(blk[i]->d), dmin = Avx2::HalfToFloat(blk[i]->dmin);
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j) {
        const __m256i msum = _mm256_madd_epi16(LoadBytes(x[j].sums + 16 * s), mins);
        const float dx = x[j].d[s];
        acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(dx * d), _mm256_cvtepi32_ps(isum[i][j]), acc[i][j]);
        acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(-(dx * dmin)), _mm256_cvtepi32_ps(msum), acc[i][j]);
      }
    }
  }
};

// Q6_K x Q8_K (see the AVX-512 Q6_KKernel).
struct Q6_KKernel : IntTiles {
  static int64_t Steps(int64_t cols) { return cols / kQK_K; }

  // The 32 six-bit values g (0..3) of half `half` of a block, unsigned.
  static __m256i Values(const BlockQ6_K* blk, int half, int g) {
    const __m256i ql = LoadBytes(blk->ql + 64 * half + 32 * (g & 1));
    const __m256i qh = LoadBytes(blk->qh + 32 * half);
    const __m256i low = g < 2 ? ql : _mm256_srli_epi16(ql, 4);
    const __m256i high = g == 0   ? _mm256_slli_epi16(qh, 4)
                         : g == 1 ? _mm256_slli_epi16(qh, 2)
                         : g == 2 ? qh
                                  : _mm256_srli_epi16(qh, 2);
    return _mm256_or_si256(_mm256_and_si256(low, _mm256_set1_epi8(0x0F)),
                           _mm256_and_si256(high, _mm256_set1_epi8(0x30)));
  }

  template <int R, int C>
  static void Step(const uint8_t* const* w, const QuantizedActRow* x, int64_t s, int64_t,
                   __m256 (&acc)[R][C]) {
    const BlockQ6_K* blk[R];
    __m256i isum[R][C];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      blk[i] = reinterpret_cast<const BlockQ6_K*>(w[i]) + s;
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j) isum[i][j] = _mm256_setzero_si256();
    }
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {  // 32 values: sub-blocks 2c and 2c+1
      __m256i wq[R], sc[R];
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        wq[i] = Values(blk[i], c / 4, c % 4);
        sc[i] = _mm256_set_m128i(_mm_set1_epi16(blk[i]->scales[2 * c + 1]),
                                 _mm_set1_epi16(blk[i]->scales[2 * c]));
      }
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j) {
        const __m256i xq = LoadBytes(x[j].q + s * kQK_K + 32 * c);
#pragma GCC unroll 16
        for (int i = 0; i < R; ++i) {
          isum[i][j] = _mm256_add_epi32(isum[i][j],
                                        _mm256_madd_epi16(_mm256_maddubs_epi16(wq[i], xq), sc[i]));
        }
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const __m256i scales = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[i]->scales)));
      const float d = Avx2::HalfToFloat(blk[i]->d);
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j) {
        const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(scales, LoadBytes(x[j].sums + 16 * s)), 5);
        const __m256i sum = _mm256_sub_epi32(isum[i][j], corr);
        acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(x[j].d[s] * d), _mm256_cvtepi32_ps(sum), acc[i][j]);
      }
    }
  }
};

}  // namespace

namespace kernel_table {

// QuantizeInt8Blocks with 8 lanes; the same operations lane by lane (max of
// |x|, 1 / scale, multiply, round to nearest even, clamp), so the same bits.
// 32 values (four vectors) per step: every block size is a multiple of 32.
void QuantizeInt8Avx2(const float* x, int64_t cols, int block, bool f16_scale, int8_t* q, float* d,
                      int16_t* sums) {
  const __m256 sign_off = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  // packs_epi32 / packs_epi16 interleave 128-bit lanes; this puts them back.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < cols / block; ++b, x += block, q += block) {
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < block; i += 8) amax = _mm256_max_ps(amax, _mm256_and_ps(_mm256_loadu_ps(x + i), sign_off));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    const float max_abs = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    const float scale = max_abs / 127.0f;
    const float inv = scale != 0 ? 1.0f / scale : 0.0f;
    d[b] = f16_scale ? _cvtsh_ss(_cvtss_sh(scale, _MM_FROUND_TO_NEAREST_INT)) : scale;
    const __m256 vinv = _mm256_set1_ps(inv);
    for (int i = 0; i < block; i += 32) {
      __m256i v[4];
      for (int k = 0; k < 4; ++k) {
        const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * k), vinv),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v[k] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
      }
      const __m256i bytes = _mm256_permutevar8x32_epi32(
          _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3])), order);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), bytes);
      if (sums != nullptr) {
        for (int g = 0; g < 2; ++g) {  // values 16 g .. 16 g + 15
          const __m256i s8 = _mm256_add_epi32(v[2 * g], v[2 * g + 1]);
          __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
          s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
          s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
          sums[b * (block / 16) + i / 16 + g] = static_cast<int16_t>(_mm_cvtsi128_si32(s4));
        }
      }
    }
  }
}

void FillAvx2MatmulQuantized(KernelTable* t) {
  t->quantize_int8 = QuantizeInt8Avx2;
  t->matmul_quantized[kQ8_0] = MatmulQuantizedWith<Avx2, Q8_0Kernel>;
  t->matmul_quantized[kQ4_0] = MatmulQuantizedWith<Avx2, Q4_0Kernel>;
  t->matmul_quantized[kQ4_K] = MatmulQuantizedWith<Avx2, Q4_KKernel>;
  t->matmul_quantized[kQ6_K] = MatmulQuantizedWith<Avx2, Q6_KKernel>;
}

}  // namespace kernel_table
}  // namespace kvs
