#include "bench/long_suite.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string_view>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "absl/strings/str_format.h"
#include "bench/cpu_name.h"
#include "client/cli_args.h"
#include "cache/kv_sequence.h"
#include "kernels/cpu_features.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "model/transformer.h"

namespace kvs {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kChunk = 512;
constexpr int kPageTokens = 16;
constexpr int kDecodeSteps = 32;
constexpr int kLongest = 16384;

// llama.cpp on this machine kind, from issue 11's table (not measured here).
constexpr double kLlamaPp512 = 178, kLlamaPp2000 = 107, kLlamaPp4096 = 114;
constexpr double kLlamaTg0 = 43.3, kLlamaTg4096 = 17.3, kLlamaBatched8 = 46.2;

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
}

void Die(const absl::Status& s, const char* what) {
  if (s.ok()) return;
  std::cerr << what << ": " << s << "\n";
  std::exit(1);
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t SumAvx2(const uint64_t* p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    a = _mm256_add_epi64(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_add_epi64(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
  }
  a = _mm256_add_epi64(a, b);
  uint64_t out[4];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), a);
  return out[0] + out[1] + out[2] + out[3];
}
#endif

uint64_t Sum(const uint64_t* p, size_t n) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) return SumAvx2(p, n);
#endif
  uint64_t s = 0;
  for (size_t i = 0; i < n; ++i) s += p[i];
  return s;
}

// GB/s of every pool thread reading its share of a 2 GiB buffer.
double ReadBandwidth(ThreadPool& pool, int runs) {
  const size_t bytes = size_t{2} << 30, n = bytes / 8;
  auto* buf = static_cast<uint64_t*>(std::aligned_alloc(64, bytes));
  const int t_count = pool.size();
  auto range = [&](int t) {
    return std::pair<size_t, size_t>{(n * t / t_count) & ~size_t{7}, (n * (t + 1) / t_count) & ~size_t{7}};
  };
  pool.Run(t_count, [&](int t, int) {
    for (size_t i = range(t).first; i < range(t).second; ++i) buf[i] = i;
  });
  std::vector<double> rates;
  std::vector<uint64_t> sums(t_count);
  volatile uint64_t sink = 0;
  for (int r = 0; r < runs; ++r) {
    const auto start = Clock::now();
    pool.Run(t_count, [&](int t, int) { sums[t] = Sum(buf + range(t).first, range(t).second - range(t).first); });
    rates.push_back(bytes / SecondsSince(start) / 1e9);
    for (uint64_t s : sums) sink = sink + s;
  }
  std::free(buf);
  return Median(rates);
}

std::vector<int32_t> RandomTokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

// The engine on one model: prefill in chunks of 512, batched decode.
class Runner {
 public:
  Runner(const Model& model, ThreadPool* pool)
      : c_(model.config()),
        t_(c_, model.weights(), pool, kChunk, kLongest + kChunk, MatmulPath::kFast),
        pages_(t_.kv_geometry(kPageTokens, KvDtype::kF16), (kLongest + 4096 + 2048) / kPageTokens),
        logits_(static_cast<size_t>(8) * c_.vocab_size) {}

  const Transformer& transformer() const { return t_; }
  PagePool& pages() { return pages_; }

  // Appends `tokens` to `kv`; returns seconds.
  double Prefill(KvSequence& kv, const std::vector<int32_t>& tokens) {
    const auto start = Clock::now();
    for (size_t i = 0; i < tokens.size(); i += kChunk) {
      const int n = static_cast<int>(std::min<size_t>(kChunk, tokens.size() - i));
      ForwardItem item{&kv, std::span<const int32_t>(tokens).subspan(i, n)};
      Die(kv.PrepareAppend(n), "PrepareAppend");
      Die(t_.Forward({&item, 1}, logits_.data()), "Forward");
    }
    return SecondsSince(start);
  }

  // `steps` greedy decode steps of all `seqs` in one batch; aggregate tok/s.
  double Decode(std::vector<KvSequence>& seqs, int steps) {
    const int b = static_cast<int>(seqs.size());
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
        next[i] = static_cast<int32_t>(std::max_element(l, l + c_.vocab_size) - l);
      }
    }
    return b * steps / SecondsSince(start);
  }

 private:
  const ModelConfig& c_;
  Transformer t_;
  PagePool pages_;
  std::vector<float> logits_;
};

void PrintRow(const std::string& what, const std::string& ours, const std::string& llama,
              const std::string& target, const char* verdict) {
  std::printf("| %s | %s | %s | %s | %s |\n", what.c_str(), ours.c_str(), llama.c_str(), target.c_str(), verdict);
}

const char* Met(bool met) { return met ? "met" : "missed"; }

}  // namespace

bool WantsSuite(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--suite" || std::string_view(argv[i]).starts_with("--suite=")) return true;
  }
  return false;
}

int LongSuiteMain(int argc, char** argv) {
  auto args = CliArgs::Parse(std::vector<std::string>(argv + 1, argv + argc), {"model", "runs", "threads", "suite"},
                             {"quick"});
  if (!args.ok() || !args->Has("model") || args->GetOr("suite", "") != "long") {
    std::cerr << "usage: kvs-bench --model M.gguf --suite long [--runs 3] [--threads N] [--quick]\n";
    return 2;
  }
  LongSuiteOptions o;
  o.model = *args->Get("model");
  o.runs = static_cast<int>(args->GetInt("runs", 3).value_or(3));
  o.threads = static_cast<int>(args->GetInt("threads", 0).value_or(0));
  o.quick = args->Has("quick");
  return RunLongSuite(o);
}

int RunLongSuite(const LongSuiteOptions& o) {
  auto model = Model::Load(o.model, {.pack_for_fast_path = true});
  if (!model.ok()) {
    std::cerr << model.status().message() << "\n";
    return 1;
  }
  const ModelConfig& c = (*model)->config();
  if (c.context_length < kLongest + kChunk) {
    std::cerr << "--suite long needs a model context of at least " << kLongest + kChunk << " tokens, this one has "
              << c.context_length << "\n";
    return 1;
  }
  ThreadPool pool(o.threads);
  Runner runner(**model, &pool);
  const int vocab = c.vocab_size;
  const int runs = std::max(1, o.runs);

  // Prefill rows; the last sequence of 4,096 and of 8,192 tokens stays for
  // the decode rows.
  std::vector<std::pair<int, double>> prefill;
  KvSequence ctx4096(&runner.pages()), ctx_long(&runner.pages());
  for (int len : {512, 2000, 4096, 8192}) {
    std::vector<double> rates;
    const std::vector<int32_t> prompt = RandomTokens(len, vocab, static_cast<uint32_t>(len));
    for (int r = 0; r < runs; ++r) {
      KvSequence kv(&runner.pages());
      rates.push_back(len / runner.Prefill(kv, prompt));
      if (r == runs - 1 && len == 4096) ctx4096 = std::move(kv);
      if (r == runs - 1 && len == 8192) ctx_long = std::move(kv);
    }
    prefill.emplace_back(len, Median(rates));
  }

  // Decode at context 0 (a one-token prompt), 4,096 and 16,384.
  auto decode_at = [&](const KvSequence& context) {
    std::vector<double> rates;
    for (int r = 0; r < runs; ++r) {
      std::vector<KvSequence> one;
      one.push_back(context.Fork());  // the same context each run
      rates.push_back(runner.Decode(one, kDecodeSteps));
    }
    return Median(rates);
  };
  KvSequence ctx0(&runner.pages());
  runner.Prefill(ctx0, {1});
  const double decode0 = decode_at(ctx0);
  const double decode4096 = decode_at(ctx4096);
  double decode_longest = 0;
  if (!o.quick) {
    runner.Prefill(ctx_long, RandomTokens(kLongest - ctx_long.length(), vocab, 16384));
    decode_longest = decode_at(ctx_long);
  }
  ctx_long = KvSequence(&runner.pages());  // frees its pages before the fan-out
  ctx4096 = KvSequence(&runner.pages());

  // 8 forks x 64 tokens on a 512-token prompt, against one stream.
  KvSequence root(&runner.pages());
  runner.Prefill(root, RandomTokens(512, vocab, 1));
  auto fan_out = [&](int branches) {
    std::vector<double> rates;
    for (int r = 0; r < runs; ++r) {
      std::vector<KvSequence> seqs;
      for (int i = 0; i < branches; ++i) seqs.push_back(root.Fork());
      rates.push_back(runner.Decode(seqs, 64));
    }
    return Median(rates);
  };
  const double one_stream = fan_out(1), eight = fan_out(8);

  const double bandwidth = ReadBandwidth(pool, runs);
  const double weight_bytes = static_cast<double>((*model)->weights().matrix_bytes);
  const double kv_per_token =
      static_cast<double>(runner.transformer().kv_geometry(kPageTokens, KvDtype::kF16).bytes_per_token());
  auto share = [&](double tok_s, int context) {
    return 100 * (weight_bytes + kv_per_token * context) * tok_s / (bandwidth * 1e9);
  };

  std::printf("kvs-bench --suite long (issue 11)\n%s\nCPU %s, kernels %s, matmul fast, KV f16, %d threads, "
              "medians of %d\nmemory read bandwidth %.1f GB/s (measured in this run)\n"
              "llama.cpp column: issue 11's figures (same machine kind, not this run); "
              "targets against llama.cpp are judged on them\n\n",
              (*model)->Summary().c_str(), CpuModelName().c_str(), ActiveKernelsName(), pool.size(), runs,
              bandwidth);
  std::printf("| row | kvsession (this run) | llama.cpp (issue 11) | target | |\n|---|---|---|---|---|\n");
  const double pp512 = prefill[0].second;
  const double llama_pp[] = {kLlamaPp512, kLlamaPp2000, kLlamaPp4096, 0};
  for (size_t i = 0; i < prefill.size(); ++i) {
    const auto [len, rate] = prefill[i];
    const std::string what =
        len >= 1000 ? absl::StrFormat("prefill, %d,%03d tokens", len / 1000, len % 1000)
                    : absl::StrFormat("prefill, %d tokens", len);
    const std::string ours = absl::StrFormat("%.1f tok/s (%.0f%% of 512)", rate, 100 * rate / pp512);
    const std::string llama = llama_pp[i] > 0 ? absl::StrFormat("%.0f tok/s (%.2fx)", llama_pp[i], rate / llama_pp[i])
                                              : "not in issue 11";
    if (len == 8192) {
      PrintRow(what, ours, llama, ">= 60% of the 512 rate (3x llama.cpp pp8192: no figure to judge)",
               Met(rate >= 0.6 * pp512));
    } else {
      PrintRow(what, ours, llama, "none of its own (reference for 8,192)", "-");
    }
  }
  PrintRow("decode, context 0", absl::StrFormat("%.1f tok/s (%.0f%% of bandwidth)", decode0, share(decode0, 0)),
           absl::StrFormat("%.1f tok/s (%.2fx)", kLlamaTg0, decode0 / kLlamaTg0), ">= 1.5x llama.cpp",
           Met(decode0 >= 1.5 * kLlamaTg0));
  PrintRow("decode, context 4,096",
           absl::StrFormat("%.1f tok/s (%.0f%% of bandwidth)", decode4096, share(decode4096, 4096)),
           absl::StrFormat("%.1f tok/s (%.2fx)", kLlamaTg4096, decode4096 / kLlamaTg4096), ">= 2.5x llama.cpp",
           Met(decode4096 >= 2.5 * kLlamaTg4096));
  if (o.quick) {
    PrintRow("decode, context 16,384", "skipped (--quick)", "not in issue 11", ">= 2.5x llama.cpp", "-");
  } else {
    PrintRow("decode, context 16,384",
             absl::StrFormat("%.1f tok/s (%.0f%% of bandwidth)", decode_longest, share(decode_longest, kLongest)),
             "not in issue 11", ">= 2.5x llama.cpp (no figure to judge)", "-");
  }
  PrintRow("8 forks x 64 tokens, 512-token prompt",
           absl::StrFormat("%.1f tok/s aggregate (%.2fx one stream of %.1f)", eight, eight / one_stream, one_stream),
           absl::StrFormat("%.1f tok/s, batched-bench B=8 (%.2fx)", kLlamaBatched8, eight / kLlamaBatched8),
           ">= 5x one stream and >= 5x llama.cpp",
           Met(eight >= 5 * one_stream && eight >= 5 * kLlamaBatched8));
  return 0;
}

}  // namespace kvs
