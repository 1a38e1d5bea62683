#include "bench/engine_bench.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <random>
#include <span>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/attention.h"
#include "kernels/top_logits.h"
#include "model/huge_page_arena.h"

namespace kvs {
namespace bench {
namespace {

void Die(const absl::Status& s, const char* what) {
  if (s.ok()) return;
  std::cerr << what << ": " << s << "\n";
  std::exit(1);
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t SumAvx2(const uint64_t* p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (size_t i = 0; i + 16 <= n; i += 16) {
    a = _mm256_add_epi64(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_add_epi64(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    c = _mm256_add_epi64(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    d = _mm256_add_epi64(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
  uint64_t out[4];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), a);
  return out[0] + out[1] + out[2] + out[3];
}
#endif

// Sum of p[0, n), n a multiple of 16.
uint64_t Sum(const uint64_t* p, size_t n) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) return SumAvx2(p, n);
#endif
  uint64_t s = 0;
  for (size_t i = 0; i < n; ++i) s += p[i];
  return s;
}

}  // namespace

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
}

std::vector<int32_t> RandomTokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

bool ChooseAmxAttention(bool wanted) {
  if (!wanted || UseAmxAttention(true)) return true;
  std::cerr << "--amx-attention: this CPU has no AMX-BF16 (or AVX512-BF16)\n";
  return false;
}

double MeasureReadBandwidth(ThreadPool& pool, int runs) {
  // On huge pages where the kernel allows, as the packed weights are.
  const size_t bytes = size_t{2} << 30, n = bytes / 8;
  HugePageArena arena;
  auto* buf = arena.Reserve(bytes) ? reinterpret_cast<uint64_t*>(arena.Take(bytes)) : nullptr;
  if (buf == nullptr) return 0;
  const int threads = pool.size();
  auto begin = [&](int t) { return (n * t / threads) & ~size_t{15}; };
  pool.Run(threads, [&](int t, int) {  // touch (and place) each thread's pages
    for (size_t i = begin(t); i < begin(t + 1); ++i) buf[i] = i;
  });
  std::vector<double> rates;
  std::vector<uint64_t> sums(threads);
  volatile uint64_t sink = 0;
  for (int r = 0; r < runs; ++r) {
    const auto start = Clock::now();
    pool.Run(threads, [&](int t, int) { sums[t] = Sum(buf + begin(t), begin(t + 1) - begin(t)); });
    rates.push_back(bytes / SecondsSince(start) / 1e9);
    for (uint64_t s : sums) sink = sink + s;
  }
  return Median(rates);
}

EngineBench::EngineBench(const Model& model, ThreadPool* pool, MatmulPath matmul, KvDtype dtype,
                         int max_context, int64_t pool_pages, int page_tokens)
    : c_(model.config()),
      t_(c_, model.weights(), pool, kChunk, max_context, matmul),
      pages_(t_.kv_geometry(page_tokens, dtype), pool_pages),
      logits_(static_cast<size_t>(8) * c_.vocab_size) {
  Die(pages_.KeepWarm(std::min<int64_t>(pool_pages, (kWarmTokens + page_tokens - 1) / page_tokens)), "KeepWarm");
}

double EngineBench::Prefill(KvSequence& kv, const std::vector<int32_t>& tokens) {
  const auto start = Clock::now();
  for (size_t i = 0; i < tokens.size(); i += kChunk) {
    const int n = static_cast<int>(std::min<size_t>(kChunk, tokens.size() - i));
    ForwardItem item{&kv, std::span<const int32_t>(tokens).subspan(i, n)};
    Die(kv.PrepareAppend(n), "PrepareAppend");
    Die(t_.Forward({&item, 1}, logits_.data()), "Forward");
  }
  return SecondsSince(start);
}

void EngineBench::LogitsFor(int rows) {
  if (logits_.size() < static_cast<size_t>(rows) * c_.vocab_size) {
    logits_.resize(static_cast<size_t>(rows) * c_.vocab_size);
  }
}

double EngineBench::Decode(std::vector<KvSequence>& seqs, int steps) {
  const int b = static_cast<int>(seqs.size());
  LogitsFor(b);
  std::vector<int32_t> next(b);
  std::vector<ForwardItem> items(b);
  for (int i = 0; i < b; ++i) next[i] = static_cast<int32_t>((7 * i + 11) % c_.vocab_size);
  const auto start = Clock::now();
  for (int s = 0; s < steps; ++s) {
    for (int i = 0; i < b; ++i) {
      items[i] = {&seqs[i], {&next[i], 1}};
      Die(seqs[i].PrepareAppend(1), "PrepareAppend");
    }
    Die(t_.Forward(items, logits_.data()), "Forward");
    for (int i = 0; i < b; ++i) {
      const float* l = &logits_[static_cast<size_t>(i) * c_.vocab_size];
      next[i] = static_cast<int32_t>(Argmax(l, c_.vocab_size));  // the service's greedy pick
    }
  }
  return b * steps / SecondsSince(start);
}

double EngineBench::DecodeBesidePrefill(std::vector<KvSequence>& seqs, KvSequence& prefill,
                                        const std::vector<int32_t>& tokens, int chunk, int steps) {
  const int b = static_cast<int>(seqs.size());
  LogitsFor(b + 1);
  std::vector<int32_t> next(b);
  std::vector<ForwardItem> items(b + 1);
  for (int i = 0; i < b; ++i) next[i] = static_cast<int32_t>((7 * i + 11) % c_.vocab_size);
  const auto start = Clock::now();
  for (int s = 0; s < steps; ++s) {
    // The chunk first, as the service's step puts decode rows first and
    // the order does not matter to attention; its last row's logits.
    const std::span<const int32_t> part(tokens.data() + static_cast<size_t>(s) * chunk, chunk);
    items[0] = {&prefill, part};
    Die(prefill.PrepareAppend(chunk), "PrepareAppend");
    for (int i = 0; i < b; ++i) {
      items[i + 1] = {&seqs[i], {&next[i], 1}};
      Die(seqs[i].PrepareAppend(1), "PrepareAppend");
    }
    Die(t_.Forward(items, logits_.data()), "Forward");
    for (int i = 0; i < b; ++i) {
      const float* l = &logits_[static_cast<size_t>(i + 1) * c_.vocab_size];
      next[i] = static_cast<int32_t>(Argmax(l, c_.vocab_size));
    }
  }
  return (b + chunk) * steps / SecondsSince(start);
}

}  // namespace bench
}  // namespace kvs
