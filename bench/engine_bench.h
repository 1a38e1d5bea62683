// The engine harness shared by kvs-bench's tables (perf_bench.cc) and its
// --suite long (long_suite.cc): one model's Transformer with its own page
// pool, prefill in chunks, batched greedy decode, and the measurements the
// tables divide by (memory read bandwidth, medians).
//
// Benchmark code: a failed forward pass prints the status and exits the
// process (code 1). Not thread-safe; one harness per thread.
#ifndef KVSESSION_BENCH_ENGINE_BENCH_H_
#define KVSESSION_BENCH_ENGINE_BENCH_H_

#include <chrono>
#include <cstdint>
#include <vector>

#include "cache/kv_sequence.h"
#include "cache/page_pool.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "model/transformer.h"

namespace kvs {
namespace bench {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t);
// The median (mean of the middle two for an even count); 0 for none.
double Median(std::vector<double> v);
// `n` token ids in [0, vocab), the same for the same seed.
std::vector<int32_t> RandomTokens(int n, int vocab, uint32_t seed);
// GB/s of every pool thread reading its share of a 2 GiB buffer (larger
// than any cache, on huge pages where the kernel allows, as the packed
// weights are); the median of `runs`; 0 if the buffer cannot be mapped.
double MeasureReadBandwidth(ThreadPool& pool, int runs);
// A bench's --amx-attention, as kvsessiond's (attention.h UseAmxAttention),
// before any KV is computed: when `wanted`, chooses the AMX attention, or
// says on stderr that this CPU has none and returns false. True otherwise.
bool ChooseAmxAttention(bool wanted);

class EngineBench {
 public:
  static constexpr int kChunk = 512;       // prefill tokens per forward pass
  static constexpr int kPageTokens = 16;   // kvsessiond's default --page-tokens
  static constexpr int kWarmTokens = 4096;  // kvsessiond's default --kv-warm-tokens

  // A Transformer for contexts up to `max_context` and a pool of
  // `pool_pages` KV pages of `dtype`, `page_tokens` tokens each, kept warm
  // as kvsessiond keeps its pool by default (PagePool::KeepWarm of
  // kWarmTokens): a prefill does not wait for the kernel to zero fresh
  // memory for its first pages, as a server's prefill does not. (A cold
  // pool cost a 512-token prefill 8% of its samples in clear_page_erms.)
  EngineBench(const Model& model, ThreadPool* pool, MatmulPath matmul, KvDtype dtype, int max_context,
              int64_t pool_pages, int page_tokens = kPageTokens);

  const Transformer& transformer() const { return t_; }
  PagePool& pages() { return pages_; }

  // Appends `tokens` to `kv` in chunks of kChunk; returns seconds.
  double Prefill(KvSequence& kv, const std::vector<int32_t>& tokens);
  // `steps` greedy decode steps of every sequence in `seqs` in one batch;
  // returns aggregate tok/s.
  double Decode(std::vector<KvSequence>& seqs, int steps);
  // `steps` steps of one batch each: a prefill chunk of `chunk` tokens of
  // `prefill` (tokens [s * chunk, (s + 1) * chunk) at step s; `tokens`
  // holds steps * chunk) beside a greedy decode row of every sequence in
  // `seqs`; returns the batch rows per second.
  double DecodeBesidePrefill(std::vector<KvSequence>& seqs, KvSequence& prefill, const std::vector<int32_t>& tokens,
                             int chunk, int steps);

 private:
  const ModelConfig& c_;
  Transformer t_;
  PagePool pages_;
  // Grows logits_ to `rows` rows of the vocabulary (before a timed loop).
  void LogitsFor(int rows);
  std::vector<float> logits_;  // 8 rows of the vocabulary at first (fan-out of 8); LogitsFor grows it
};

}  // namespace bench
}  // namespace kvs

#endif  // KVSESSION_BENCH_ENGINE_BENCH_H_
