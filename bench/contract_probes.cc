// kvs-bench-probes: the inner loops of arithmetic contracts the kernels do
// NOT use, measured against the loops they do use, so that a proposed
// contract change (which changes bits at every level) is priced on the CPU
// at hand before anyone builds it. Single thread, data in L1, AVX2 only
// (every x86-64 level the project ships has it); each case reports
// G multiply-adds/s. Nothing here is called by the engine.
//
//   gemm/*     one half-group of 8 packed Q8_0 weight rows (packed_q8_0.h)
//              against J activation rows, 32 blocks (1,024 columns):
//                maddubs  the AVX2 kernel's loop (packed_q8_0_avx2.cc):
//                         VPSIGNB + VPMADDUBSW + VPMADDWD + VPADDD per 32
//                         products
//                int16    weights widened to int16 (VPMOVZXBW), activation
//                         rows widened once, VPMADDWD + VPADDD per 16
//                         products, the weights' +128 taken out per block
//              Both give the packed contract's exact int32 block sums and
//              the same bits; main() checks that before it measures.
//   values/*   the value pass of q8_0 attention for Q queries over 128
//              keys of head_dim 128 (attention_q8_0_values.h):
//                f32      today's contract: per key, the int8 values
//                         converted to F32 and one FMA per 8 products with
//                         the key's BF16-rounded weight ("rows": converted
//                         per key, as a decode row; "converted": from a
//                         chunk converted once, as a prefill tile)
//                int16    a contract with int16 weights per 16-key group:
//                         keys in pairs, VPMADDWD + VPADDD per 16 products
//                         into int32, flushed to F32 once per group
//                         ("rows": the pairs interleaved per key pair;
//                         "converted": from pairs interleaved once)
//              The two differ in bits by design; only speed is compared.
//
// Usage: build/bin/kvs-bench-probes [--benchmark_filter=values]
// docs/performance/zen3.md ("What other contracts would buy on AVX2") has the
// figures from Zen 3 and what they say.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bench/cpu_name.h"

namespace {

#define KVS_AVX2 __attribute__((target("avx2,fma,f16c")))

// ---- GEMM: 8 weight rows x J activation rows --------------------------------

constexpr int kBlocks = 32;  // 1,024 columns
alignas(64) uint8_t g_weights[kBlocks * 512];  // a packed group's quants (q + 128)
alignas(64) uint16_t g_weight_scales[kBlocks * 16];
alignas(64) int8_t g_x8[8][kBlocks * 32];
alignas(64) int16_t g_x16[8][kBlocks * 32];
int32_t g_x_sums128[8][kBlocks];  // 128 * the sum of an activation block's quants
float g_x_scales[8][kBlocks];

uint64_t g_state = 0x9e3779b97f4a7c15ull;
uint32_t Random() {
  g_state ^= g_state << 13;
  g_state ^= g_state >> 7;
  g_state ^= g_state << 17;
  return static_cast<uint32_t>(g_state >> 16);
}

void FillGemmData() {
  for (uint8_t& w : g_weights) w = static_cast<uint8_t>(Random());
  for (uint16_t& s : g_weight_scales) s = static_cast<uint16_t>(0x2000 + Random() % 0x1000);  // small F16
  for (int j = 0; j < 8; ++j) {
    for (int b = 0; b < kBlocks; ++b) {
      int sum = 0;
      for (int k = 0; k < 32; ++k) {
        const int q = static_cast<int>(Random() % 255) - 127;  // activation quants: [-127, 127]
        g_x8[j][32 * b + k] = static_cast<int8_t>(q);
        g_x16[j][32 * b + k] = static_cast<int16_t>(q);
        sum += q;
      }
      g_x_sums128[j][b] = 128 * sum;
      g_x_scales[j][b] = 0.001f * static_cast<float>(1 + Random() % 97);
    }
  }
}

template <int J>
KVS_AVX2 __attribute__((noinline)) void GemmMaddubs(int half, float* out) {
  const __m256i ones = _mm256_set1_epi16(1), bias = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 acc[J];
  #pragma GCC unroll 8
  for (int j = 0; j < J; ++j) acc[j] = _mm256_setzero_ps();
  for (int b = 0; b < kBlocks; ++b) {
    const uint8_t* wq = g_weights + b * 512;
    __m256i isum[J];
#pragma GCC unroll 8
    for (int kk = 0; kk < 8; ++kk) {
      const __m256i q =
          _mm256_xor_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(wq + kk * 64 + 32 * half)), bias);
      const __m256i mag = _mm256_abs_epi8(q);
#pragma GCC unroll 8
      for (int j = 0; j < J; ++j) {
        int32_t slice;
        std::memcpy(&slice, g_x8[j] + 32 * b + 4 * kk, 4);
        const __m256i dot =
            _mm256_madd_epi16(_mm256_maddubs_epi16(mag, _mm256_sign_epi8(_mm256_set1_epi32(slice), q)), ones);
        isum[j] = kk == 0 ? dot : _mm256_add_epi32(isum[j], dot);
        asm("" : "+x"(isum[j]));
      }
    }
    const __m256 dw =
        _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(g_weight_scales + 16 * b + 8 * half)));
    #pragma GCC unroll 8
    for (int j = 0; j < J; ++j) {
      acc[j] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_mul_ps(dw, _mm256_set1_ps(g_x_scales[j][b])), acc[j]);
    }
  }
  #pragma GCC unroll 8
  for (int j = 0; j < J; ++j) _mm256_storeu_ps(out + 8 * j, acc[j]);
}

// Lanes of the int16 form's sums: rows 0 1 4 5 2 3 6 7 (VPHADDD of the
// rows 0-3 and 4-7 registers); the same permutation puts them back.
template <int J>
KVS_AVX2 __attribute__((noinline)) void GemmInt16(int half, float* out) {
  const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  __m256 acc[J];
  #pragma GCC unroll 8
  for (int j = 0; j < J; ++j) acc[j] = _mm256_setzero_ps();
  for (int b = 0; b < kBlocks; ++b) {
    const uint8_t* wq = g_weights + b * 512;
    __m256i lo[J], hi[J];  // rows 0-3 and 4-7 of the half, two lanes a row
#pragma GCC unroll 8
    for (int kk = 0; kk < 8; ++kk) {
      const __m256i w0 =
          _mm256_cvtepu8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(wq + kk * 64 + 32 * half)));
      const __m256i w1 =
          _mm256_cvtepu8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(wq + kk * 64 + 32 * half + 16)));
#pragma GCC unroll 8
      for (int j = 0; j < J; ++j) {
        int64_t four;
        std::memcpy(&four, g_x16[j] + 32 * b + 4 * kk, 8);
        const __m256i x = _mm256_set1_epi64x(four);
        const __m256i d0 = _mm256_madd_epi16(w0, x), d1 = _mm256_madd_epi16(w1, x);
        lo[j] = kk == 0 ? d0 : _mm256_add_epi32(lo[j], d0);
        hi[j] = kk == 0 ? d1 : _mm256_add_epi32(hi[j], d1);
        asm("" : "+x"(lo[j]), "+x"(hi[j]));
      }
    }
    const __m256 dw = _mm256_permutevar8x32_ps(
        _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(g_weight_scales + 16 * b + 8 * half))), order);
    #pragma GCC unroll 8
    for (int j = 0; j < J; ++j) {
      const __m256i isum = _mm256_sub_epi32(_mm256_hadd_epi32(lo[j], hi[j]), _mm256_set1_epi32(g_x_sums128[j][b]));
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(g_x_scales[j][b])), acc[j]);
    }
  }
  #pragma GCC unroll 8
  for (int j = 0; j < J; ++j) _mm256_storeu_ps(out + 8 * j, _mm256_permutevar8x32_ps(acc[j], order));
}

// ---- Values: Q queries x 128 keys of head_dim 128 ---------------------------

constexpr int kKeys = 128, kHeadDim = 128, kRowBytes = 136;  // q8_0 rows: 4 x (F16 scale + 32 quants)
alignas(64) uint8_t g_values[kKeys * kRowBytes];
alignas(64) float g_converted[kKeys * kHeadDim];           // "converted": each key's quants as F32
alignas(64) int16_t g_pairs[kKeys / 2][kHeadDim * 2];      // "converted": key pairs interleaved as int16
alignas(64) float g_weights_f32[4][4][kKeys];              // [query][block][key], BF16-rounded
alignas(64) int16_t g_weights_i16[4][4][kKeys];            // [query][block][key]
alignas(64) float g_group_scales[4][4][kKeys / 16];        // [query][block][group]

const int8_t* Quants(int key, int d) {
  return reinterpret_cast<const int8_t*>(g_values + key * kRowBytes + (d / 32) * 34 + 2 + d % 32);
}

void FillValueData() {
  for (uint8_t& v : g_values) v = static_cast<uint8_t>(Random());
  for (int t = 0; t < kKeys; ++t) {
    for (int d = 0; d < kHeadDim; ++d) g_converted[t * kHeadDim + d] = *Quants(t, d);
  }
  // Pair i, 16 dims at a time: VPUNPCKLWD/VPUNPCKHWD of the two keys'
  // widened quants, as the rows form makes them.
  for (int i = 0; i < kKeys / 2; ++i) {
    for (int d16 = 0; d16 < kHeadDim; d16 += 16) {
      int16_t* out = g_pairs[i] + 2 * d16;
      for (int lane = 0; lane < 2; ++lane) {
        for (int e = 0; e < 4; ++e) {  // unpacklo: elements 0-3 of each 128-bit lane
          out[8 * lane + 2 * e] = *Quants(2 * i, d16 + 8 * lane + e);
          out[8 * lane + 2 * e + 1] = *Quants(2 * i + 1, d16 + 8 * lane + e);
          out[16 + 8 * lane + 2 * e] = *Quants(2 * i, d16 + 8 * lane + 4 + e);
          out[16 + 8 * lane + 2 * e + 1] = *Quants(2 * i + 1, d16 + 8 * lane + 4 + e);
        }
      }
    }
  }
  for (auto& q : g_weights_f32) for (auto& b : q) for (float& w : b) w = 0.001f * static_cast<float>(Random() % 1000);
  for (auto& q : g_weights_i16) for (auto& b : q) for (int16_t& w : b) w = static_cast<int16_t>(Random() % 32767);
  for (auto& q : g_group_scales)
    for (auto& b : q)
      for (float& s : b) s = 1e-5f * static_cast<float>(1 + Random() % 100);
}

// out[s][d] += the keys' weighted values for Q queries, one q8_0 block (4
// vectors of 8) at a time, as ValueMicroTileQ8_0 at the AVX2 level
// (kValueQ 2, kValueChunks 4): the accumulators loaded, kept in registers
// over the keys, stored.
template <int Q, bool kConverted>
KVS_AVX2 __attribute__((noinline)) void ValuesF32(float* out) {
  for (int blk = 0; blk < 4; ++blk) {
    __m256 a[Q][4];
#pragma GCC unroll 4
    for (int s = 0; s < Q; ++s) {
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) a[s][c] = _mm256_loadu_ps(out + s * kHeadDim + 32 * blk + 8 * c);
    }
    for (int t = 0; t < kKeys; ++t) {
      __m256 v[4];
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        if constexpr (kConverted) {
          v[c] = _mm256_load_ps(g_converted + t * kHeadDim + 32 * blk + 8 * c);
        } else {
          int64_t q;
          std::memcpy(&q, Quants(t, 32 * blk + 8 * c), 8);
          v[c] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(q)));
        }
        asm("" : "+x"(v[c]));
      }
#pragma GCC unroll 4
      for (int s = 0; s < Q; ++s) {
        const __m256 w = _mm256_broadcast_ss(&g_weights_f32[s][blk][t]);
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) a[s][c] = _mm256_fmadd_ps(w, v[c], a[s][c]);
      }
    }
#pragma GCC unroll 4
    for (int s = 0; s < Q; ++s) {
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) _mm256_storeu_ps(out + s * kHeadDim + 32 * blk + 8 * c, a[s][c]);
    }
  }
}

// The int16 form: per block and group of 16 keys, int32 sums in registers
// over the group's 8 pairs, then added to out once (convert, scale, FMA):
// 8 sums, 4 pair vectors and a weight fill the 16 registers at 2 queries.
template <int Q, bool kConverted>
KVS_AVX2 __attribute__((noinline)) void ValuesInt16(float* out) {
  for (int blk = 0; blk < 4; ++blk) {
    for (int g = 0; g < kKeys / 16; ++g) {
      __m256i sum[Q][4];
#pragma GCC unroll 4
      for (int s = 0; s < Q; ++s) {
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) sum[s][c] = _mm256_setzero_si256();
      }
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const int t = 16 * g + 2 * i;
        __m256i p[4];  // the pair's 32 dims of this block, interleaved
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          if constexpr (kConverted) {
            const int16_t* at = g_pairs[t / 2] + 2 * (32 * blk + 16 * h);
            p[2 * h] = _mm256_load_si256(reinterpret_cast<const __m256i*>(at));
            p[2 * h + 1] = _mm256_load_si256(reinterpret_cast<const __m256i*>(at + 16));
          } else {
            const __m256i v0 =
                _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(Quants(t, 32 * blk + 16 * h))));
            const __m256i v1 = _mm256_cvtepi8_epi16(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(Quants(t + 1, 32 * blk + 16 * h))));
            p[2 * h] = _mm256_unpacklo_epi16(v0, v1);
            p[2 * h + 1] = _mm256_unpackhi_epi16(v0, v1);
          }
          asm("" : "+x"(p[2 * h]), "+x"(p[2 * h + 1]));
        }
#pragma GCC unroll 4
        for (int s = 0; s < Q; ++s) {
          int32_t pair;
          std::memcpy(&pair, &g_weights_i16[s][blk][t], 4);
          const __m256i w = _mm256_set1_epi32(pair);
#pragma GCC unroll 4
          for (int c = 0; c < 4; ++c) {
            __m256i x = _mm256_add_epi32(sum[s][c], _mm256_madd_epi16(p[c], w));
            asm("" : "+x"(x));  // a copy: with the array element as operand GCC spills the array
            sum[s][c] = x;
          }
        }
      }
#pragma GCC unroll 4
      for (int s = 0; s < Q; ++s) {
        const __m256 scale = _mm256_set1_ps(g_group_scales[s][blk][g]);
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          float* at = out + s * kHeadDim + 32 * blk + 8 * c;
          _mm256_storeu_ps(at, _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[s][c]), scale, _mm256_loadu_ps(at)));
        }
      }
    }
  }
}

// ---- Registration -----------------------------------------------------------

template <void (*Kernel)(float*)>
void Run(benchmark::State& state, double macs) {
  alignas(64) float out[4 * kHeadDim] = {};
  for (auto _ : state) {
    Kernel(out);
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
  }
  state.counters["GMAC/s"] =
      benchmark::Counter(macs * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

template <int J, void (*Kernel)(int, float*)>
void Half0(float* out) { Kernel(0, out); }

// Exits when the int16 GEMM form does not give the packed contract's bits.
void CheckGemmFormsAgree() {
  alignas(64) float a[8 * 8], b[8 * 8];
  for (int half = 0; half < 2; ++half) {
    GemmMaddubs<4>(half, a);
    GemmInt16<4>(half, b);
    if (std::memcmp(a, b, sizeof(float) * 8 * 4) != 0) {
      std::fprintf(stderr, "kvs-bench-probes: the int16 GEMM form differs from the packed contract\n");
      std::exit(1);
    }
  }
}

void Register() {
  const double gemm_macs = 8.0 * kBlocks * 32;
  benchmark::RegisterBenchmark("gemm/maddubs/8rows_x4", Run<Half0<4, GemmMaddubs<4>>>, gemm_macs * 4);
  benchmark::RegisterBenchmark("gemm/int16/8rows_x4", Run<Half0<4, GemmInt16<4>>>, gemm_macs * 4);
  benchmark::RegisterBenchmark("gemm/maddubs/8rows_x6", Run<Half0<6, GemmMaddubs<6>>>, gemm_macs * 6);
  benchmark::RegisterBenchmark("gemm/int16/8rows_x6", Run<Half0<6, GemmInt16<6>>>, gemm_macs * 6);
  const double value_macs = static_cast<double>(kKeys) * kHeadDim;
  benchmark::RegisterBenchmark("values/f32/rows/2queries", Run<ValuesF32<2, false>>, value_macs * 2);
  benchmark::RegisterBenchmark("values/int16/rows/2queries", Run<ValuesInt16<2, false>>, value_macs * 2);
  benchmark::RegisterBenchmark("values/f32/converted/2queries", Run<ValuesF32<2, true>>, value_macs * 2);
  benchmark::RegisterBenchmark("values/int16/converted/2queries", Run<ValuesInt16<2, true>>, value_macs * 2);
}

}  // namespace

int main(int argc, char** argv) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::fprintf(stderr, "kvs-bench-probes: this CPU has no AVX2 and FMA; nothing to measure\n");
    return 0;
  }
  FillGemmData();
  FillValueData();
  CheckGemmFormsAgree();
  Register();
  benchmark::AddCustomContext("cpu", kvs::CpuModelName());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
