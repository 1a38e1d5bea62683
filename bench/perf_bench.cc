// kvs-bench: the engine's speed on one model file, as one table.
//
//   build/bin/kvs-bench --model M.gguf [--runs 5] [--threads N]
//       [--matmul fast|exact] [--kv-type f16|bf16|q8_0|f32] [--long 4096]
//       [--prefill-lengths 512,2000,4096,8192] [--prefill-runs R]
//       [--attention tiled|per-query|both] [--page-tokens 16] [--amx-attention]
//   build/bin/kvs-bench --model M.gguf --suite long [--runs 3] [--quick]
//       prints issue 11's rows with their targets instead (long_suite.h)
//   build/bin/kvs-bench --model M.gguf --one-row prefill:8192 [--runs 1]
//       runs one of those rows alone, for a profiler (one_row.h)
//
// Rows (medians of --runs):
//   - the machine's memory read bandwidth (all threads streaming a 2 GiB
//     buffer);
//   - prefill tok/s of a 512-token prompt, and of each --prefill-lengths
//     prompt (--prefill-runs runs, default --runs) with its ratio to the
//     512-token rate against the target (60% at 8,192); with
//     --attention both, each prompt with the tiled and with the per-query
//     attention kernel (attention.h UseTiledAttention), one after the
//     other in this run, and their ratio (--amx-attention: the AMX
//     attention for bf16 and q8_0 caches, attention.h UseAmxAttention);
//   - decode tok/s at context 0 and at context --long (4096), and the decode
//     roofline efficiency = (weight bytes + KV bytes read per token) x tok/s
//     / measured bandwidth;
//   - fork fan-out: 1, 2, 4, 8 branches of a 512-token prompt generating 64
//     tokens each, decoded together (one batch per step): aggregate tok/s
//     and the ratio to one stream;
//   - two --long prompts with 4 branches each (32 tokens), decoded together with
//     the batch's rows interleaved (a, b, a, b, ...) and grouped by prompt
//     (a, a, a, a, b, ...), one after the other in each run: attention
//     shares a prompt's pages only between consecutive rows, which is why
//     the service groups them (service/decode_row_order.h);
//   - sessions that share no pages decoded together, a row each: the two
//     --long prompts, alone and beside a new prompt's prefill (64 tokens a
//     step), and 8 prompts of 512 tokens;
//   - peak RSS (of the model and the benchmarks, before the bandwidth probe).
// Greedy argmax stands in for sampling (sampling cost is not what is
// measured here).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <iostream>
#include <random>
#include <vector>

#include "bench/engine_bench.h"
#include "bench/long_suite.h"
#include "bench/one_row.h"
#include "cache/kv_sequence.h"
#include "client/cli_args.h"
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

// The --prefill-lengths rows: each length's median tok/s over `runs`
// prefills (chunks of 512), under the tiled and/or the per-query attention
// kernel, against `rate512` (the tiled kernel's 512-token rate).
std::vector<std::string> PrefillRows(EngineBench& bench, const std::string& lengths, int runs,
                                     const std::string& attention, int vocab, int context, double rate512) {
  std::vector<std::string> rows;
  std::stringstream list(lengths);
  for (std::string item; std::getline(list, item, ',');) {
    const int n = std::atoi(item.c_str());
    if (n <= 0 || n > context) continue;
    const std::vector<int32_t> prompt = RandomTokens(n, vocab, 3);
    double rate[2] = {0, 0};  // tiled, per-query
    for (int kernel = 0; kernel < 2; ++kernel) {
      const bool tiled = kernel == 0;
      if (attention != "both" && tiled != (attention != "per-query")) continue;
      UseTiledAttention(tiled);
      std::vector<double> rates;
      for (int r = 0; r < std::max(1, runs); ++r) {
        KvSequence kv(&bench.pages());
        rates.push_back(n / bench.Prefill(kv, prompt));
      }
      rate[kernel] = Median(rates);
      char line[256];
      std::snprintf(line, sizeof line,
                    "| prefill, %d-token prompt, %s attention | %.1f tok/s | %.2f of the 512-token rate%s |",
                    n, tiled ? "tiled" : "per-query", rate[kernel], rate[kernel] / rate512,
                    n >= 8192 ? " (target 0.60)" : "");
      rows.push_back(line);
    }
    if (rate[0] > 0 && rate[1] > 0) {
      char line[160];
      std::snprintf(line, sizeof line, "| prefill, %d-token prompt: tiled / per-query | %.2fx | same bits |", n,
                    rate[0] / rate[1]);
      rows.push_back(line);
    }
  }
  return rows;
}

int Main(int argc, char** argv) {
  auto args = CliArgs::Parse(std::vector<std::string>(argv + 1, argv + argc),
                             {"model", "runs", "threads", "matmul", "kv-type", "long", "prefill-lengths",
                              "prefill-runs", "attention", "page-tokens"},
                             {"amx-attention"});
  if (!args.ok() || !args->Has("model")) {
    std::cerr << "usage: kvs-bench --model M.gguf [--runs 5] [--threads N] [--matmul fast|exact] "
                 "[--kv-type f16|bf16|q8_0|f32] [--long 4096] [--prefill-lengths 512,2000,4096,8192] "
                 "[--prefill-runs R] [--attention tiled|per-query|both] [--page-tokens 16] [--amx-attention]\n";
    return 2;
  }
  const int runs = static_cast<int>(args->GetInt("runs", 5).value_or(5));
  bool ok = false;
  const MatmulPath matmul = ParseMatmulPath(args->GetOr("matmul", "fast"), &ok);
  const std::optional<KvDtype> kv_dtype = KvDtypeFromName(args->GetOr("kv-type", "f16"));
  if (!kv_dtype) {
    std::cerr << "--kv-type must be f16, bf16, q8_0 or f32\n";
    return 2;
  }
  const KvDtype dtype = *kv_dtype;
  // Tokens per KV page, as kvsessiond's --page-tokens: a (layer, KV head)'s
  // keys are one block per page, so this is the length of the runs a
  // decode row's attention reads contiguously.
  const int page_tokens = static_cast<int>(args->GetInt("page-tokens", EngineBench::kPageTokens).value_or(0));
  if (page_tokens < 1 || page_tokens > 256) {
    std::cerr << "--page-tokens must be in [1, 256]\n";
    return 2;
  }
  if (!bench::ChooseAmxAttention(args->Has("amx-attention"))) return 1;
  auto model = Model::Load(*args->Get("model"), {.pack_for_fast_path = matmul == MatmulPath::kFast});
  if (!model.ok()) {
    std::cerr << model.status().message() << "\n";
    return 1;
  }
  const ModelConfig& c = (*model)->config();
  const int long_ctx = static_cast<int>(std::min<int64_t>(args->GetInt("long", 4096).value_or(4096),
                                                          c.context_length - 128));
  ThreadPool pool(static_cast<int>(args->GetInt("threads", 0).value_or(0)));
  EngineBench bench(**model, &pool, matmul, dtype, c.context_length,
                    (static_cast<int64_t>(c.context_length) + 4096) / page_tokens * 2, page_tokens);
  const int vocab = c.vocab_size;

  std::printf("%s\nkernels %s, attention %s, matmul %s, KV %s in pages of %d tokens, %d threads\n\n",
              (*model)->Summary().c_str(), ActiveKernelsName(), AttentionUsesAmx(dtype, c.head_dim) ? "amx" : "vector",
              MatmulPathName(matmul), KvDtypeName(dtype), page_tokens, pool.size());

  // Prefill of 512 tokens.
  const std::string attention = args->GetOr("attention", "tiled");
  UseTiledAttention(attention != "per-query");
  std::vector<double> prefill;
  const std::vector<int32_t> prompt512 = RandomTokens(512, vocab, 1);
  for (int r = 0; r < runs; ++r) {
    KvSequence kv(&bench.pages());
    prefill.push_back(512 / bench.Prefill(kv, prompt512));
  }
  const std::vector<std::string> prefill_rows = PrefillRows(
      bench, args->GetOr("prefill-lengths", ""), static_cast<int>(args->GetInt("prefill-runs", runs).value_or(runs)),
      attention, vocab, static_cast<int>(c.context_length), Median(prefill));
  UseTiledAttention(attention != "per-query");

  // Decode at context ~0 (a 1-token prompt) and at `long_ctx`.
  const int decode_steps = 32;
  std::vector<double> decode0, decode_long;
  for (int r = 0; r < runs; ++r) {
    std::vector<KvSequence> one;
    one.emplace_back(&bench.pages());
    bench.Prefill(one[0], {1});
    decode0.push_back(bench.Decode(one, decode_steps));
  }
  KvSequence long_seq(&bench.pages());
  bench.Prefill(long_seq, RandomTokens(long_ctx, vocab, 2));
  for (int r = 0; r < runs; ++r) {
    std::vector<KvSequence> one;
    one.push_back(long_seq.Fork());  // the same 4096-token context each run
    decode_long.push_back(bench.Decode(one, decode_steps));
  }

  // Fork fan-out of a 512-token prompt, 64 tokens per branch.
  KvSequence root(&bench.pages());
  bench.Prefill(root, prompt512);
  std::vector<std::pair<int, double>> fanout;
  for (int branches : {1, 2, 4, 8}) {
    std::vector<double> rates;
    for (int r = 0; r < runs; ++r) {
      std::vector<KvSequence> seqs;
      for (int i = 0; i < branches; ++i) seqs.push_back(root.Fork());
      rates.push_back(bench.Decode(seqs, 64));
    }
    fanout.emplace_back(branches, Median(rates));
  }

  // Two --long prompts' forks, rows interleaved and grouped (what the
  // service's decode row order buys); the orders alternate going first.
  KvSequence root_b(&bench.pages());
  bench.Prefill(root_b, RandomTokens(long_ctx, vocab, 3));
  std::vector<double> interleaved, grouped;
  for (int r = 0; r < runs; ++r) {
    for (int order = 0; order < 2; ++order) {
      const bool group = (order + r) % 2 == 1;
      std::vector<KvSequence> seqs;
      for (int i = 0; i < 8; ++i) {
        const bool first_prompt = group ? i < 4 : i % 2 == 0;
        seqs.push_back(first_prompt ? long_seq.Fork() : root_b.Fork());
      }
      (group ? grouped : interleaved).push_back(bench.Decode(seqs, 32));
    }
  }
  // Sessions that share no pages, a decode row each, decoded together:
  // the two --long prompts, and 8 prompts of 512 tokens.
  std::vector<double> two_long, eight_short, beside_prefill;
  for (int r = 0; r < runs; ++r) {
    std::vector<KvSequence> seqs;
    seqs.push_back(long_seq.Fork());
    seqs.push_back(root_b.Fork());
    two_long.push_back(bench.Decode(seqs, 32));
  }
  // The same two rows beside a new prompt's prefill, 64 tokens a step.
  constexpr int kBesideChunk = 64, kBesideSteps = 16;
  const std::vector<int32_t> beside_tokens = RandomTokens(kBesideChunk * kBesideSteps, vocab, 4);
  for (int r = 0; r < runs; ++r) {
    std::vector<KvSequence> seqs;
    seqs.push_back(long_seq.Fork());
    seqs.push_back(root_b.Fork());
    KvSequence fresh(&bench.pages());
    beside_prefill.push_back(bench.DecodeBesidePrefill(seqs, fresh, beside_tokens, kBesideChunk, kBesideSteps));
  }
  root_b = KvSequence(&bench.pages());
  {
    std::vector<KvSequence> roots;
    for (int i = 0; i < 8; ++i) {
      roots.emplace_back(&bench.pages());
      bench.Prefill(roots.back(), RandomTokens(512, vocab, 10 + i));
    }
    for (int r = 0; r < runs; ++r) {
      std::vector<KvSequence> seqs;
      for (KvSequence& root : roots) seqs.push_back(root.Fork());
      eight_short.push_back(bench.Decode(seqs, 32));
    }
  }

  // Peak RSS of the engine work, before the bandwidth probe's 2 GiB buffer.
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  const double bandwidth = MeasureReadBandwidth(pool, runs);

  const double weight_bytes = static_cast<double>((*model)->weights().matrix_bytes);
  const double kv_per_token =
      static_cast<double>(bench.transformer().kv_geometry(page_tokens, dtype).bytes_per_token());
  auto efficiency = [&](double tok_s, int context) {
    return (weight_bytes + kv_per_token * context) * tok_s / (bandwidth * 1e9);
  };
  std::printf("| measure | value | notes |\n|---|---|---|\n");
  std::printf("| memory read bandwidth | %.1f GB/s | %d threads streaming 2 GiB |\n", bandwidth, pool.size());
  std::printf("| weights read per token | %.1f MB | KV %.1f KB per context token |\n", weight_bytes / 1e6,
              kv_per_token / 1e3);
  std::printf("| prefill, 512-token prompt | %.1f tok/s | attention %s |\n", Median(prefill),
              attention == "per-query" ? "per-query" : "tiled");
  for (const std::string& row : prefill_rows) std::printf("%s\n", row.c_str());
  std::printf("| decode, context 0 | %.1f tok/s | roofline efficiency %.0f%% |\n", Median(decode0),
              100 * efficiency(Median(decode0), 0));
  std::printf("| decode, context %d | %.1f tok/s | roofline efficiency %.0f%% |\n", long_ctx,
              Median(decode_long), 100 * efficiency(Median(decode_long), long_ctx));
  const double single = fanout[0].second;
  for (const auto& [branches, rate] : fanout) {
    std::printf("| fan-out %d x 64 tokens (512-token prompt) | %.1f tok/s | %.2fx one stream |\n", branches,
                rate, rate / single);
  }
  std::printf("| 2 prompts of %d tokens x 4 forks x 32 tokens, rows interleaved | %.1f tok/s | |\n", long_ctx,
              Median(interleaved));
  std::printf("| 2 prompts of %d tokens x 4 forks x 32 tokens, rows grouped by prompt | %.1f tok/s | %.2fx "
              "interleaved |\n", long_ctx, Median(grouped), Median(grouped) / Median(interleaved));
  std::printf("| 2 sessions of %d tokens, a row each, decoded together x 32 tokens | %.1f tok/s | %.2fx one "
              "stream at that context |\n", long_ctx, Median(two_long), Median(two_long) / Median(decode_long));
  std::printf("| 8 sessions of 512 tokens, a row each, decoded together x 32 tokens | %.1f tok/s | |\n",
              Median(eight_short));
  std::printf("| 2 sessions of %d tokens, a row each, beside a prefill of 64 tokens a step, x %d steps | %.1f "
              "rows/s | |\n", long_ctx, kBesideSteps, Median(beside_prefill));
  std::printf("| peak RSS | %.0f MiB | model, KV cache and workspaces |\n", usage.ru_maxrss / 1024.0);
  return 0;
}

}  // namespace
}  // namespace kvs

int main(int argc, char** argv) {
  if (kvs::WantsSuite(argc, argv)) return kvs::LongSuiteMain(argc, argv);  // --suite long
  if (kvs::WantsOneRow(argc, argv)) return kvs::OneRowMain(argc, argv);    // --one-row ROW
  return kvs::Main(argc, argv);
}
