// kvs-bench-vnni-tiles: how many 512-bit VPDPBUSD a core retires a second
// in the shapes a packed Q8_0 GEMM tile can take (packed_q8_0.h's layout:
// a register holds one 4-byte slice of 16 weight rows, and each product
// takes one activation row's slice broadcast to 16 lanes). Single thread,
// data in L1, integer sums only (no F32 step per block), so what is
// priced is the instruction mix alone. Each case reports G VPDPBUSD/s.
//
//   vnni/chains/N       N independent accumulators, register operands only:
//                       N = 1 gives the latency, large N the throughput.
//   vnni/chains-wssd/N  the same chains of VPDPWSSD (int16 pairs), the
//                       instruction of the q8_0 values' int16 groups
//                       (attention_q8_0_values.h); reported as
//                       G_vpdpwssd/s.
//   vnni/tile/MODE/GgJj g weight groups x j activation rows a tile; per
//                       32-value block, 8 x g weight loads and 8 x j slices:
//                         emb  each product's slice is its embedded
//                              broadcast (g x j chains; the kernel's tile
//                              until the thirty-ninth sitting was emb/G1J4)
//                         sep  each slice is broadcast once into a register
//                              that the g groups' products share
//                              (packed_q8_0_avx512.cc's tile is sep/G2J4)
//
// Usage: build/bin/kvs-bench-vnni-tiles [--benchmark_filter=tile]
// Skips every case on a CPU without AVX-512 VNNI. docs/performance/zen5.md
// ("Two groups a tile") has the figures from Zen 5 and what they say.
// GCC 12 flags its own intrinsics (intentionally undefined pass-through
// operands) as maybe-uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdint>
#include <string>

#include "bench/cpu_name.h"

namespace {

#define KVS_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

constexpr int kBlocks = 16;  // blocks cycled through: 8 KB of weights per group
alignas(64) uint8_t g_weights[4][kBlocks * 512];
alignas(64) uint8_t g_x[8][kBlocks * 32];

bool HasVnni() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni"); }

template <int N, bool kWords>
KVS_VNNI int32_t Chains(int64_t iterations) {
  __m512i acc[N];
  __m512i a = _mm512_set1_epi8(1);
  const __m512i b = _mm512_set1_epi8(2);
#pragma GCC unroll 16
  for (int i = 0; i < N; ++i) acc[i] = _mm512_set1_epi32(i);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < N; ++i) {
      acc[i] = kWords ? _mm512_dpwssd_epi32(acc[i], a, b) : _mm512_dpbusd_epi32(acc[i], a, b);
    }
    asm volatile("" : "+v"(a));  // a is not loop-invariant to the compiler
  }
  __m512i s = acc[0];
#pragma GCC unroll 16
  for (int i = 1; i < N; ++i) s = _mm512_add_epi32(s, acc[i]);
  return _mm512_reduce_add_epi32(s);
}

template <int G, int J, bool kEmbedded>
KVS_VNNI int32_t Tile(int64_t blocks) {
  __m512i p[G][J];
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {
#pragma GCC unroll 8
    for (int j = 0; j < J; ++j) p[g][j] = _mm512_setzero_si512();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const int at = static_cast<int>(b % kBlocks);
#pragma GCC unroll 8
    for (int kk = 0; kk < 8; ++kk) {
      __m512i w[G];
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) w[g] = _mm512_load_si512(g_weights[g] + at * 512 + kk * 64);
#pragma GCC unroll 8
      for (int j = 0; j < J; ++j) {
        const int32_t* slice = reinterpret_cast<const int32_t*>(g_x[j] + at * 32 + 4 * kk);
        if constexpr (kEmbedded) {
#pragma GCC unroll 4
          for (int g = 0; g < G; ++g) {
            asm("vpdpbusd %[s]%{1to16%}, %[w], %[a]" : [a] "+v"(p[g][j]) : [w] "v"(w[g]), [s] "m"(*slice));
          }
        } else {
          __m512i s;
          asm("vpbroadcastd %[m], %[s]" : [s] "=v"(s) : [m] "m"(*slice));  // kept a register, never folded
#pragma GCC unroll 4
          for (int g = 0; g < G; ++g) p[g][j] = _mm512_dpbusd_epi32(p[g][j], w[g], s);
        }
      }
    }
  }
  __m512i s = _mm512_setzero_si512();
  for (int g = 0; g < G; ++g) {
    for (int j = 0; j < J; ++j) s = _mm512_add_epi32(s, p[g][j]);
  }
  return _mm512_reduce_add_epi32(s);
}

void Report(benchmark::State& state, double products, const char* counter = "G_vpdpbusd/s") {
  state.counters[counter] = benchmark::Counter(products / 1e9, benchmark::Counter::kIsRate);
}

template <int N, bool kWords = false>
void BM_Chains(benchmark::State& state) {
  if (!HasVnni()) return state.SkipWithError("no AVX-512 VNNI");
  constexpr int64_t kIterations = 1 << 16;
  for (auto _ : state) benchmark::DoNotOptimize(Chains<N, kWords>(kIterations));
  Report(state, static_cast<double>(state.iterations()) * kIterations * N, kWords ? "G_vpdpwssd/s" : "G_vpdpbusd/s");
}

template <int G, int J, bool kEmbedded>
void BM_Tile(benchmark::State& state) {
  if (!HasVnni()) return state.SkipWithError("no AVX-512 VNNI");
  constexpr int64_t kBlocksPerCall = 1 << 13;
  for (auto _ : state) benchmark::DoNotOptimize(Tile<G, J, kEmbedded>(kBlocksPerCall));
  Report(state, static_cast<double>(state.iterations()) * kBlocksPerCall * 8 * G * J);
}

}  // namespace

BENCHMARK(BM_Chains<1>)->Name("vnni/chains/1");
BENCHMARK(BM_Chains<4>)->Name("vnni/chains/4");
BENCHMARK(BM_Chains<8>)->Name("vnni/chains/8");
BENCHMARK(BM_Chains<12>)->Name("vnni/chains/12");
BENCHMARK(BM_Chains<4, true>)->Name("vnni/chains-wssd/4");
BENCHMARK(BM_Chains<12, true>)->Name("vnni/chains-wssd/12");
BENCHMARK(BM_Tile<1, 4, true>)->Name("vnni/tile/emb/G1J4");
BENCHMARK(BM_Tile<1, 8, true>)->Name("vnni/tile/emb/G1J8");
BENCHMARK(BM_Tile<2, 4, true>)->Name("vnni/tile/emb/G2J4");
BENCHMARK(BM_Tile<1, 8, false>)->Name("vnni/tile/sep/G1J8");
BENCHMARK(BM_Tile<2, 4, false>)->Name("vnni/tile/sep/G2J4");
BENCHMARK(BM_Tile<2, 8, false>)->Name("vnni/tile/sep/G2J8");
BENCHMARK(BM_Tile<3, 4, false>)->Name("vnni/tile/sep/G3J4");
BENCHMARK(BM_Tile<4, 4, false>)->Name("vnni/tile/sep/G4J4");

int main(int argc, char** argv) {
  for (auto& group : g_weights) {
    for (size_t i = 0; i < sizeof group; ++i) group[i] = static_cast<uint8_t>(i * 131 + 7);
  }
  for (auto& row : g_x) {
    for (size_t i = 0; i < sizeof row; ++i) row[i] = static_cast<uint8_t>(i * 71 + 3);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("cpu", kvs::CpuModelName());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
