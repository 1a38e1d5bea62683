// kvs-bench-kernels cases for picking tokens from a 151,936-token
// vocabulary (Qwen's), one thread, per kernel level, µs per call:
//   top_logits/argmax/<level>      Argmax (greedy decoding)
//   top_logits/top_k40/<level>     TopK with k = 40 (the sampler's default)
//   top_logits/std/max_element     what greedy was before: std::max_element
//   top_logits/std/partial_sort40  what top-k was before: (logit, id) pairs
//                                  of the whole vocabulary, std::partial_sort
//   top_logits/sort_all/radix      SortLogits, the whole vocabulary in order
//                                  (the sampler with top-k off)
//   top_logits/std/sort_all        what that was before: the pairs, std::sort
//   top_logits/softmax_denominator/<level>  SoftmaxDenominator (top-p's
//                                  normalizer with top-k off)
//   top_logits/std/exp_sum         what that was before: std::exp summed
//   sampler/<params>               Sampler::Sample, the service's pick per
//                                  row and token, on the active level:
//                                  greedy, the default (temperature 0.8,
//                                  top-k 40, top-p 0.95, min-p 0.05), and
//                                  top-k off (top-p 0.95 only) on flat
//                                  logits, whose nucleus (about 13,000
//                                  tokens) makes the sampler sort the whole
//                                  vocabulary, and on peaked ones, whose
//                                  nucleus lies within the best 1,024
//                                  (sampler.h kFewCandidates)
//   sampler/logprobs_top20/<way>   a token's logprob and the top 20's, as
//                                  Logprob + TopLogprobs or Logprobs
// The flat logits are N(0, 3) in random order; the peaked ones N(0, 2)
// with 16 tokens near 15, which then hold 99% of the probability (a
// model's nucleus is mostly tens of tokens: Holtzman et al. 2020). A
// fan-out step of 8 forks picks 8 times.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/softmax_denominator.h"
#include "kernels/sort_logits.h"
#include "kernels/top_logits.h"
#include "model/sampler.h"

namespace kvs {
namespace {

constexpr int kVocab = 151936;

const std::vector<float>& Logits() {
  static const std::vector<float> logits = [] {
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0, 3);
    std::vector<float> x(kVocab);
    for (float& v : x) v = nd(rng);
    return x;
  }();
  return logits;
}

const std::vector<float>& PeakedLogits() {
  static const std::vector<float> logits = [] {
    std::mt19937 rng(4);
    std::normal_distribution<float> nd(0, 1);
    std::vector<float> x(kVocab);
    for (float& v : x) v = 2 * nd(rng);
    for (int i = 0; i < 16; ++i) x[(i * 9311 + 77) % kVocab] = 15 + nd(rng);
    return x;
  }();
  return logits;
}

bool UseLevel(benchmark::State& state, KernelIsa isa) {
  if (ForceKernelIsa(isa)) return true;
  state.SkipWithError("kernel level not supported on this CPU");
  return false;
}

void ArgmaxCase(benchmark::State& state, KernelIsa isa) {
  if (!UseLevel(state, isa)) return;
  const std::vector<float>& x = Logits();
  for (auto _ : state) benchmark::DoNotOptimize(Argmax(x.data(), kVocab));
}

void TopK40Case(benchmark::State& state, KernelIsa isa) {
  if (!UseLevel(state, isa)) return;
  const std::vector<float>& x = Logits();
  std::vector<TopLogit> out(40);
  for (auto _ : state) benchmark::DoNotOptimize(TopK(x.data(), kVocab, 40, out.data()));
}

void SoftmaxDenominatorCase(benchmark::State& state, KernelIsa isa) {
  if (!UseLevel(state, isa)) return;
  const std::vector<float>& x = Logits();
  const float max = x[Argmax(x.data(), kVocab)];
  for (auto _ : state) benchmark::DoNotOptimize(SoftmaxDenominator(x.data(), kVocab, max));
}

void StdExpSum(benchmark::State& state) {
  const std::vector<float>& x = Logits();
  const float max = *std::max_element(x.begin(), x.end());
  for (auto _ : state) {
    double z = 0;
    for (float v : x) z += std::exp(static_cast<double>(v - max));
    benchmark::DoNotOptimize(z);
  }
}

void StdMaxElement(benchmark::State& state) {
  const std::vector<float>& x = Logits();
  for (auto _ : state) benchmark::DoNotOptimize(std::max_element(x.begin(), x.end()) - x.begin());
}

// A plain std:: pipeline: (logit, id) pairs of the whole vocabulary, built
// anew each time, then `sort` (a partial or a whole sort) by (logit
// descending, id ascending).
template <class Sort>
void StdPairsCase(benchmark::State& state, Sort sort) {
  const std::vector<float>& x = Logits();
  std::vector<std::pair<float, int32_t>> c;
  c.reserve(kVocab);
  const auto better = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  for (auto _ : state) {
    c.clear();
    for (int i = 0; i < kVocab; ++i) c.emplace_back(x[i], i);
    sort(c, better);
    benchmark::DoNotOptimize(c.data());
  }
}

void StdPartialSort40(benchmark::State& state) {
  StdPairsCase(state, [](auto& c, auto better) { std::partial_sort(c.begin(), c.begin() + 40, c.end(), better); });
}

void StdSortAll(benchmark::State& state) {
  StdPairsCase(state, [](auto& c, auto better) { std::sort(c.begin(), c.end(), better); });
}

void SortLogitsCase(benchmark::State& state) {
  const std::vector<float>& x = Logits();
  std::vector<TopLogit> out(kVocab);
  std::vector<uint64_t> scratch(2 * kVocab);
  for (auto _ : state) benchmark::DoNotOptimize(SortLogits(x.data(), kVocab, out.data(), scratch.data()));
}

void SamplerCase(benchmark::State& state, SamplingParams params, bool peaked) {
  const std::vector<float>& x = peaked ? PeakedLogits() : Logits();
  Sampler sampler(kVocab);
  SequenceRng rng(7);
  const std::vector<int32_t> recent(64, 5);
  for (auto _ : state) benchmark::DoNotOptimize(sampler.Sample(params, x, recent, &rng));
}

// What "logprobs" cost per token and row with top_logprobs 20: the
// token's and the top ones' as two calls (each its own softmax
// denominator), or Sampler::Logprobs (one).
void LogprobsCase(benchmark::State& state, bool together) {
  const std::vector<float>& x = Logits();
  Sampler sampler(kVocab);
  std::vector<std::pair<int32_t, float>> top(20);
  float logprob = 0;
  for (auto _ : state) {
    if (together) {
      benchmark::DoNotOptimize(sampler.Logprobs(x, 7, 20, &logprob, top.data()));
    } else {
      benchmark::DoNotOptimize(Sampler::Logprob(x, 7));
      sampler.TopLogprobs(x, 20, &top);
    }
    benchmark::DoNotOptimize(top.data());
  }
}

const bool registered = [] {
  const auto configure = [](benchmark::internal::Benchmark* b) {
    b->Repetitions(5)->ReportAggregatesOnly(true)->UseRealTime()->Unit(benchmark::kMicrosecond);
  };
  for (KernelIsa isa : {KernelIsa::kScalar, KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    const std::string level = KernelIsaName(isa);
    configure(benchmark::RegisterBenchmark(("top_logits/argmax/" + level).c_str(), ArgmaxCase, isa));
    configure(benchmark::RegisterBenchmark(("top_logits/top_k40/" + level).c_str(), TopK40Case, isa));
    configure(benchmark::RegisterBenchmark(("top_logits/softmax_denominator/" + level).c_str(),
                                           SoftmaxDenominatorCase, isa));
  }
  configure(benchmark::RegisterBenchmark("top_logits/std/max_element", StdMaxElement));
  configure(benchmark::RegisterBenchmark("top_logits/std/partial_sort40", StdPartialSort40));
  configure(benchmark::RegisterBenchmark("top_logits/sort_all/radix", SortLogitsCase));
  configure(benchmark::RegisterBenchmark("top_logits/std/sort_all", StdSortAll));
  configure(benchmark::RegisterBenchmark("top_logits/std/exp_sum", StdExpSum));
  SamplingParams greedy, defaults, top_k_off;
  greedy.temperature = 0;
  top_k_off.top_k = 0;
  top_k_off.min_p = 0;
  configure(benchmark::RegisterBenchmark("sampler/greedy", SamplerCase, greedy, false));
  configure(benchmark::RegisterBenchmark("sampler/default", SamplerCase, defaults, false));
  configure(benchmark::RegisterBenchmark("sampler/top_k_off_top_p0.95", SamplerCase, top_k_off, false));
  configure(benchmark::RegisterBenchmark("sampler/top_k_off_top_p0.95/peaked", SamplerCase, top_k_off, true));
  configure(benchmark::RegisterBenchmark("sampler/logprobs_top20/two_calls", LogprobsCase, false));
  configure(benchmark::RegisterBenchmark("sampler/logprobs_top20/together", LogprobsCase, true));
  return true;
}();

}  // namespace
}  // namespace kvs
