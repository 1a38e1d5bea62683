#include "bench/long_suite.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/cpu_name.h"
#include "bench/engine_bench.h"
#include "bench/llama_cpp_figures.h"
#include "client/cli_args.h"
#include "cache/kv_sequence.h"
#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "model/transformer.h"

namespace kvs {
namespace {

using bench::EngineBench;
using bench::Median;
using bench::MeasureReadBandwidth;
using bench::RandomTokens;

constexpr int kChunk = EngineBench::kChunk;
constexpr int kPageTokens = EngineBench::kPageTokens;
constexpr int kLongest = 16384;

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
  auto args = CliArgs::Parse(std::vector<std::string>(argv + 1, argv + argc),
                             {"model", "runs", "rounds", "threads", "suite", "kv-type", "llama-cpp", "llama-model"},
                             {"quick", "amx-attention"});
  const std::optional<KvDtype> kv_dtype = args.ok() ? KvDtypeFromName(args->GetOr("kv-type", "f16")) : std::nullopt;
  if (!args.ok() || !args->Has("model") || args->GetOr("suite", "") != "long" || !kv_dtype ||
      args->Has("llama-cpp") != args->Has("llama-model")) {
    std::cerr << "usage: kvs-bench --model M.gguf --suite long [--runs 3] [--rounds 1] [--threads N] [--quick] "
                 "[--kv-type f16|bf16|q8_0|f32] [--amx-attention] [--llama-cpp DIR --llama-model TWIN.gguf]\n";
    return 2;
  }
  LongSuiteOptions o;
  o.model = *args->Get("model");
  o.runs = static_cast<int>(args->GetInt("runs", 3).value_or(3));
  o.rounds = static_cast<int>(args->GetInt("rounds", 1).value_or(1));
  o.threads = static_cast<int>(args->GetInt("threads", 0).value_or(0));
  o.quick = args->Has("quick");
  o.amx_attention = args->Has("amx-attention");
  o.kv_dtype = *kv_dtype;
  o.llama_cpp_dir = args->GetOr("llama-cpp", "");
  o.llama_model = args->GetOr("llama-model", "");
  return RunLongSuite(o);
}

namespace {

// One round's figures of kvsession's engine rows (tok/s; each the median of
// `runs` runs), and the read bandwidth measured in that round (GB/s).
struct EngineRound {
  double prefill[4] = {};  // 512, 2,000, 4,096 and 8,192 tokens
  double decode0 = 0, decode4096 = 0, decode_longest = 0;
  double one_stream = 0, eight = 0;
  double bandwidth = 0;
};

constexpr int kPrefillLengths[4] = {512, 2000, 4096, 8192};

EngineRound MeasureEngineRound(EngineBench& runner, ThreadPool& pool, int vocab, int runs, bool quick) {
  EngineRound f;
  // Prefill rows; the last sequence of 4,096 and of 8,192 tokens stays for
  // the decode rows.
  KvSequence ctx4096(&runner.pages()), ctx_long(&runner.pages());
  for (int i = 0; i < 4; ++i) {
    const int len = kPrefillLengths[i];
    std::vector<double> rates;
    const std::vector<int32_t> prompt = RandomTokens(len, vocab, static_cast<uint32_t>(len));
    for (int r = 0; r < runs; ++r) {
      KvSequence kv(&runner.pages());
      rates.push_back(len / runner.Prefill(kv, prompt));
      if (r == runs - 1 && len == 4096) ctx4096 = std::move(kv);
      if (r == runs - 1 && len == 8192) ctx_long = std::move(kv);
    }
    f.prefill[i] = Median(rates);
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
  f.decode0 = decode_at(ctx0);
  f.decode4096 = decode_at(ctx4096);
  if (!quick) {
    runner.Prefill(ctx_long, RandomTokens(kLongest - ctx_long.length(), vocab, 16384));
    f.decode_longest = decode_at(ctx_long);
  }
  ctx_long = KvSequence(&runner.pages());  // frees its pages before the fan-out
  ctx4096 = KvSequence(&runner.pages());

  // kFanOutBranches forks x kFanOutTokens on a kFanOutPrompt-token prompt,
  // against one stream.
  KvSequence root(&runner.pages());
  runner.Prefill(root, RandomTokens(kFanOutPrompt, vocab, 1));
  auto fan_out = [&](int branches) {
    std::vector<double> rates;
    for (int r = 0; r < runs; ++r) {
      std::vector<KvSequence> seqs;
      for (int i = 0; i < branches; ++i) seqs.push_back(root.Fork());
      rates.push_back(runner.Decode(seqs, kFanOutTokens));
    }
    return Median(rates);
  };
  f.one_stream = fan_out(1);
  f.eight = fan_out(kFanOutBranches);
  f.bandwidth = MeasureReadBandwidth(pool, runs);
  return f;
}

// The median over rounds of what `of` gives for round r.
template <class Of>
double OverRounds(size_t rounds, const Of& of) {
  std::vector<double> v;
  for (size_t r = 0; r < rounds; ++r) v.push_back(of(r));
  return Median(v);
}

// Rounds r for which `met(r)` holds, as " (k of n rounds)" when there is
// more than one round; "" otherwise.
template <class Met>
std::string RoundsMet(size_t rounds, const Met& met) {
  if (rounds < 2) return "";
  size_t k = 0;
  for (size_t r = 0; r < rounds; ++r) k += met(r) ? 1 : 0;
  return absl::StrFormat(" (%d of %d rounds)", k, rounds);
}

// Every round's figures, kvsession / llama.cpp (tok/s; "-": no figure), for
// the rows the table judges: what the medians above were taken of.
void PrintRounds(const std::vector<EngineRound>& ours, const std::vector<bench::LlamaCppFigures>& theirs,
                 bool quick) {
  std::printf("\nEach round, kvsession / llama.cpp, tok/s:\n\n| row |");
  for (size_t r = 0; r < ours.size(); ++r) std::printf(" round %zu |", r + 1);
  std::printf("\n|---|");
  for (size_t r = 0; r < ours.size(); ++r) std::printf("---|");
  std::printf("\n");
  auto row = [&](const char* what, auto ours_r, auto theirs_r) {
    std::printf("| %s |", what);
    for (size_t r = 0; r < ours.size(); ++r) {
      const double figure = theirs_r(theirs[r]);
      std::printf(" %.1f / %s |", ours_r(ours[r]), figure > 0 ? absl::StrFormat("%.1f", figure).c_str() : "-");
    }
    std::printf("\n");
  };
  using Llama = bench::LlamaCppFigures;
  row("prefill, 512 tokens", [](const EngineRound& f) { return f.prefill[0]; }, [](const Llama& l) { return l.pp512; });
  row("prefill, 8,192 tokens", [](const EngineRound& f) { return f.prefill[3]; },
      [](const Llama& l) { return l.pp8192; });
  row("decode, context 0", [](const EngineRound& f) { return f.decode0; }, [](const Llama& l) { return l.tg0; });
  row("decode, context 4,096", [](const EngineRound& f) { return f.decode4096; },
      [](const Llama& l) { return l.tg4096; });
  if (!quick) {
    row("decode, context 16,384", [](const EngineRound& f) { return f.decode_longest; },
        [](const Llama& l) { return l.tg16384; });
  }
  row("8 forks x 64 tokens", [](const EngineRound& f) { return f.eight; }, [](const Llama& l) { return l.batched8; });
  row("one stream of 64 tokens (the fan-out's reference)", [](const EngineRound& f) { return f.one_stream; },
      [](const Llama&) { return 0.0; });
}

}  // namespace

int RunLongSuite(const LongSuiteOptions& o) {
  if (!bench::ChooseAmxAttention(o.amx_attention)) return 1;
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
  if (!KvDtypeFitsHeadDim(o.kv_dtype, c.head_dim)) {
    std::cerr << "--kv-type " << KvDtypeName(o.kv_dtype)
              << " needs a head_dim that is a multiple of 32 and at most 1024\n";
    return 1;
  }
  EngineBench runner(**model, &pool, MatmulPath::kFast, o.kv_dtype, kLongest + kChunk,
                     (kLongest + 4096 + 2048) / kPageTokens);
  const int runs = std::max(1, o.runs);
  const size_t rounds = static_cast<size_t>(std::max(1, o.rounds));

  // Rounds: kvsession's rows, then llama.cpp's when it is measured, so each
  // round's ratios compare figures taken minutes apart rather than a whole
  // suite apart.
  std::vector<EngineRound> ours;
  std::vector<bench::LlamaCppFigures> theirs;
  for (size_t r = 0; r < rounds; ++r) {
    ours.push_back(MeasureEngineRound(runner, pool, c.vocab_size, runs, o.quick));
    if (!o.llama_cpp_dir.empty()) {
      auto measured = bench::MeasureLlamaCpp(
          {.bin_dir = o.llama_cpp_dir, .model = o.llama_model, .threads = pool.size(), .long_context = !o.quick});
      if (!measured.ok()) {
        std::cerr << measured.status().message() << "\n";
        return 1;
      }
      theirs.push_back(*measured);
    }
  }
  if (theirs.empty()) theirs.assign(rounds, bench::IssueElevenFigures());
  const bench::LlamaCppFigures& llama = theirs.front();  // source and which figures exist

  // A row: kvsession's and llama.cpp's medians over the rounds, and the
  // median of the rounds' ratios (the figure targets are judged on).
  using Field = double EngineRound::*;
  using LlamaField = double bench::LlamaCppFigures::*;
  auto ours_of = [&](Field f) { return OverRounds(rounds, [&](size_t r) { return ours[r].*f; }); };
  auto theirs_of = [&](LlamaField f) { return OverRounds(rounds, [&](size_t r) { return theirs[r].*f; }); };
  auto ratio_of = [&](auto ours_r, LlamaField f) {
    return OverRounds(rounds, [&](size_t r) { return theirs[r].*f > 0 ? ours_r(r) / (theirs[r].*f) : 0.0; });
  };

  const double bandwidth = ours_of(&EngineRound::bandwidth);
  const double weight_bytes = static_cast<double>((*model)->weights().matrix_bytes);
  const double kv_per_token =
      static_cast<double>(runner.transformer().kv_geometry(kPageTokens, o.kv_dtype).bytes_per_token());
  const double f16_per_token =
      static_cast<double>(runner.transformer().kv_geometry(kPageTokens, KvDtype::kF16).bytes_per_token());
  // The decode rate the measured bandwidth allows at `context`: every
  // step reads the weights and the context's KV once.
  auto ceiling = [&](int context) { return bandwidth * 1e9 / (weight_bytes + kv_per_token * context); };
  // The aggregate rate it allows the fan-out row: a step reads the weights
  // once for all the forks, the prompt's pages once (the forks fold them
  // as one tile: AttentionUpdateRuns) and each fork's own KV, on average
  // (kFanOutTokens - 1) / 2 tokens over the row's steps.
  const double fan_out_ceiling =
      kFanOutBranches * bandwidth * 1e9 /
      (weight_bytes + kv_per_token * (kFanOutPrompt + kFanOutBranches * (kFanOutTokens - 1) / 2.0));
  // A decode rate as a percentage of that ceiling.
  auto share = [&](double tok_s, int context) { return 100 * tok_s / ceiling(context); };

  const std::string how =
      rounds > 1 ? absl::StrFormat("medians of %d rounds of %d run%s each%s", rounds, runs, runs == 1 ? "" : "s",
                                   llama.measured ? "; kvsession and llama.cpp alternate round by round, and "
                                                    "each ratio is the median of the rounds' ratios"
                                                  : "")
                 : absl::StrFormat("medians of %d", runs);
  std::printf("kvs-bench --suite long (issue 11)\n%s\nCPU %s, kernels %s, attention %s, matmul fast, KV %s, "
              "%d threads, %s\nmemory read bandwidth %.1f GB/s (measured in this run)\n"
              "llama.cpp column: %s; targets against llama.cpp are judged on it\n\n",
              (*model)->Summary().c_str(), CpuModelName().c_str(), ActiveKernelsName(),
              AttentionUsesAmx(o.kv_dtype, c.head_dim) ? "amx" : "vector", KvDtypeName(o.kv_dtype), pool.size(),
              how.c_str(), bandwidth, llama.source.c_str());
  const char* llama_header = llama.measured ? "llama.cpp (this run)" : "llama.cpp (issue 11)";
  const char* none = llama.measured ? "no figure" : "not in issue 11";
  std::printf("| row | kvsession (this run) | %s | target | |\n|---|---|---|---|---|\n", llama_header);
  // "<figure> tok/s (<ratio>x)", or `none` when there is no figure.
  auto llama_cell = [&](double figure, double ratio) {
    return figure > 0 ? absl::StrFormat("%.1f tok/s (%.2fx)", figure, ratio) : std::string(none);
  };
  const LlamaField llama_pp[] = {&bench::LlamaCppFigures::pp512, &bench::LlamaCppFigures::pp2000,
                                 &bench::LlamaCppFigures::pp4096, &bench::LlamaCppFigures::pp8192};
  for (int i = 0; i < 4; ++i) {
    const int len = kPrefillLengths[i];
    const double rate = OverRounds(rounds, [&](size_t r) { return ours[r].prefill[i]; });
    // The share of the 512-token rate, the median of the rounds' shares.
    const double of512 = OverRounds(rounds, [&](size_t r) { return ours[r].prefill[i] / ours[r].prefill[0]; });
    const double ratio = ratio_of([&](size_t r) { return ours[r].prefill[i]; }, llama_pp[i]);
    const std::string what = len >= 1000 ? absl::StrFormat("prefill, %d,%03d tokens", len / 1000, len % 1000)
                                         : absl::StrFormat("prefill, %d tokens", len);
    const std::string ours_cell = absl::StrFormat("%.1f tok/s (%.0f%% of 512)", rate, 100 * of512);
    const std::string cell = llama_cell(theirs_of(llama_pp[i]), ratio);
    if (len == 8192) {
      const std::string met_rounds = RoundsMet(rounds, [&](size_t r) {
        return ours[r].prefill[3] >= 0.6 * ours[r].prefill[0] &&
               (llama.pp8192 <= 0 || ours[r].prefill[3] >= 3 * theirs[r].pp8192);
      });
      if (llama.pp8192 > 0) {
        PrintRow(what, ours_cell, cell, ">= 60% of the 512 rate and >= 3x llama.cpp",
                 (Met(of512 >= 0.6 && ratio >= 3) + met_rounds).c_str());
      } else {
        PrintRow(what, ours_cell, cell, ">= 60% of the 512 rate (3x llama.cpp pp8192: no figure to judge)",
                 (Met(of512 >= 0.6) + met_rounds).c_str());
      }
    } else {
      PrintRow(what, ours_cell, cell, "none of its own (reference for 8,192)", "-");
    }
  }
  // A decode row: target `factor` x llama.cpp's figure, judged on the
  // median ratio when there is a figure, with the rate it asks for and the
  // bandwidth ceiling beside it (a target above the ceiling cannot be met
  // on this machine).
  auto decode_row = [&](const char* what, Field field, int context, LlamaField figure_field, double factor) {
    const double ours_rate = ours_of(field), figure = theirs_of(figure_field);
    const double ratio = ratio_of([&](size_t r) { return ours[r].*field; }, figure_field);
    const std::string target =
        figure > 0 ? absl::StrFormat(">= %.1fx llama.cpp: %.1f tok/s; the bandwidth allows %.1f", factor,
                                     factor * figure, ceiling(context))
                   : absl::StrFormat(">= %.1fx llama.cpp (no figure to judge); the bandwidth allows %.1f tok/s",
                                     factor, ceiling(context));
    const std::string verdict =
        figure <= 0                          ? std::string("-")
        : ratio >= factor                    ? std::string("met")
        : factor * figure > ceiling(context) ? std::string("missed (above the bandwidth ceiling)")
                                             : std::string("missed");
    const std::string met_rounds =
        figure <= 0 ? ""
                    : RoundsMet(rounds, [&](size_t r) { return ours[r].*field >= factor * (theirs[r].*figure_field); });
    PrintRow(what, absl::StrFormat("%.1f tok/s (%.0f%% of bandwidth)", ours_rate, share(ours_rate, context)),
             llama_cell(figure, ratio), target, (verdict + met_rounds).c_str());
  };
  decode_row("decode, context 0", &EngineRound::decode0, 0, &bench::LlamaCppFigures::tg0, 1.5);
  decode_row("decode, context 4,096", &EngineRound::decode4096, 4096, &bench::LlamaCppFigures::tg4096, 2.5);
  if (o.quick) {
    PrintRow("decode, context 16,384", "skipped (--quick)", none, ">= 2.5x llama.cpp", "-");
  } else {
    decode_row("decode, context 16,384", &EngineRound::decode_longest, kLongest, &bench::LlamaCppFigures::tg16384,
               2.5);
  }
  // 5x llama.cpp can ask more of the fan-out row than the bus carries: its
  // forks share one read of the weights a step, so their ceiling is about
  // kFanOutBranches times one stream's, not 5 times llama.cpp's.
  const double eight = ours_of(&EngineRound::eight), one_stream = ours_of(&EngineRound::one_stream);
  const double own_ratio = OverRounds(rounds, [&](size_t r) { return ours[r].eight / ours[r].one_stream; });
  const double batched8 = theirs_of(&bench::LlamaCppFigures::batched8);
  const double llama_ratio = ratio_of([&](size_t r) { return ours[r].eight; }, &bench::LlamaCppFigures::batched8);
  const bool five_own = own_ratio >= 5;
  const std::string fan_out_verdict =
      std::string(five_own && batched8 > 0 && llama_ratio >= 5           ? "met"
                  : five_own && batched8 > 0 && 5 * batched8 > fan_out_ceiling
                      ? "missed (5x llama.cpp is above the bandwidth ceiling)"
                      : "missed") +
      RoundsMet(rounds, [&](size_t r) {
        return ours[r].eight >= 5 * ours[r].one_stream && ours[r].eight >= 5 * theirs[r].batched8;
      });
  PrintRow(absl::StrFormat("%d forks x %d tokens, %d-token prompt", kFanOutBranches, kFanOutTokens, kFanOutPrompt),
           absl::StrFormat("%.1f tok/s aggregate (%.2fx one stream of %.1f; %.0f%% of bandwidth)", eight, own_ratio,
                           one_stream, 100 * eight / fan_out_ceiling),
           batched8 > 0 ? absl::StrFormat("%.1f tok/s, batched-bench B=8 (%.2fx)", batched8, llama_ratio)
                        : std::string(none),
           absl::StrFormat(">= 5x one stream and >= 5x llama.cpp: %.1f tok/s; the bandwidth allows %.1f",
                           5 * (one_stream > batched8 ? one_stream : batched8), fan_out_ceiling),
           fan_out_verdict.c_str());
  if (o.kv_dtype != KvDtype::kF16) {
    PrintRow(absl::StrFormat("KV bytes per token, %s", KvDtypeName(o.kv_dtype)),
             absl::StrFormat("%.0f bytes (%.3fx f16's %.0f): %.0f tokens per GiB", kv_per_token,
                             kv_per_token / f16_per_token, f16_per_token, (1 << 30) / kv_per_token),
             "q8_0: 34 bytes per 32 values, as llama.cpp's", "q8_0 halves f16's bytes",
             o.kv_dtype == KvDtype::kQ8_0 ? Met(kv_per_token <= 0.54 * f16_per_token) : "-");
  }
  if (rounds > 1) PrintRounds(ours, theirs, o.quick);
  return 0;
}

}  // namespace kvs
