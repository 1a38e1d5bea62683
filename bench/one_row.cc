#include "bench/one_row.h"

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "bench/engine_bench.h"
#include "bench/long_suite.h"
#include "client/cli_args.h"
#include "cache/kv_sequence.h"
#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "kernels/kv_dtype.h"
#include "model/model.h"
#include "model/thread_pool.h"

namespace kvs {
namespace {

using bench::EngineBench;
using bench::RandomTokens;

constexpr int kMaxForks = 64;

int Usage() {
  std::cerr << "usage: kvs-bench --model M.gguf --one-row prefill:N|decode:N|fan-out:B [--runs 1] [--threads N] "
               "[--kv-type f16|bf16|q8_0|f32] [--page-tokens 16] [--amx-attention]\n";
  return 2;
}

}  // namespace

bool WantsOneRow(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a(argv[i]);
    if (a == "--one-row" || a.starts_with("--one-row=")) return true;
  }
  return false;
}

int OneRowMain(int argc, char** argv) {
  auto args = CliArgs::Parse(std::vector<std::string>(argv + 1, argv + argc),
                             {"model", "one-row", "runs", "threads", "kv-type", "page-tokens"}, {"amx-attention"});
  if (!args.ok() || !args->Has("model") || !args->Has("one-row")) return Usage();
  const std::optional<KvDtype> dtype = KvDtypeFromName(args->GetOr("kv-type", "f16"));
  const absl::StatusOr<int64_t> runs = args->GetInt("runs", 1);
  const absl::StatusOr<int64_t> threads = args->GetInt("threads", 0);
  // Tokens per KV page, as kvsessiond's --page-tokens (the suite's rows use the default).
  const absl::StatusOr<int64_t> page_tokens = args->GetInt("page-tokens", EngineBench::kPageTokens);
  const std::string row = *args->Get("one-row");
  const size_t colon = row.find(':');
  int n = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(row.substr(colon + 1), &n)) return Usage();
  const std::string kind = row.substr(0, colon);
  if (!dtype || !runs.ok() || *runs < 1 || !threads.ok() || *threads < 0 || !page_tokens.ok() || *page_tokens < 1 ||
      *page_tokens > 256 ||
      !(kind == "prefill" || kind == "decode" || kind == "fan-out") || n < 0 || (kind != "decode" && n < 1) ||
      (kind == "fan-out" && n > kMaxForks)) {
    return Usage();
  }
  if (!bench::ChooseAmxAttention(args->Has("amx-attention"))) return 1;
  auto model = Model::Load(*args->Get("model"), {.pack_for_fast_path = true});
  if (!model.ok()) {
    std::cerr << model.status().message() << "\n";
    return 1;
  }
  const ModelConfig& c = (*model)->config();
  const int context = kind == "fan-out" ? kFanOutPrompt + kFanOutTokens : n + (kind == "decode" ? kDecodeSteps + 1 : 0);
  if (context > c.context_length) {
    std::cerr << "--one-row " << row << " needs a context of " << context << " tokens; the model has "
              << c.context_length << "\n";
    return 1;
  }
  ThreadPool pool(static_cast<int>(*threads));
  const int64_t pages_per_sequence = (context + *page_tokens - 1) / *page_tokens + 1;
  const int64_t sequences = kind == "fan-out" ? n + 1 : 2;
  EngineBench runner(**model, &pool, MatmulPath::kFast, *dtype, context, pages_per_sequence * sequences,
                     static_cast<int>(*page_tokens));
  std::fprintf(stderr, "%s\nkernels %s, attention %s, KV %s, %d tokens a page, %d threads; row %s, %d run%s\n",
               (*model)->Summary().c_str(), ActiveKernelsName(),
               AttentionUsesAmx(*dtype, c.head_dim) ? "amx" : "vector", KvDtypeName(*dtype),
               static_cast<int>(*page_tokens), pool.size(), row.c_str(), static_cast<int>(*runs),
               *runs == 1 ? "" : "s");

  if (kind == "prefill") {
    const std::vector<int32_t> prompt = RandomTokens(n, c.vocab_size, static_cast<uint32_t>(n));
    std::fprintf(stderr, "setup done; the row starts\n");
    for (int64_t r = 0; r < *runs; ++r) {
      KvSequence kv(&runner.pages());
      std::printf("prefill %d tokens: %.1f tok/s\n", n, n / runner.Prefill(kv, prompt));
      std::fflush(stdout);
    }
    return 0;
  }
  KvSequence root(&runner.pages());
  if (kind == "decode") {
    runner.Prefill(root, n == 0 ? std::vector<int32_t>{1} : RandomTokens(n, c.vocab_size, static_cast<uint32_t>(n)));
  } else {
    runner.Prefill(root, RandomTokens(kFanOutPrompt, c.vocab_size, 1));
  }
  std::fprintf(stderr, "setup done; the row starts\n");
  for (int64_t r = 0; r < *runs; ++r) {
    std::vector<KvSequence> seqs;
    const int forks = kind == "fan-out" ? n : 1;
    for (int i = 0; i < forks; ++i) seqs.push_back(root.Fork());
    const double rate = runner.Decode(seqs, kind == "fan-out" ? kFanOutTokens : kDecodeSteps);
    std::printf("%s: %.1f tok/s\n", row.c_str(), rate);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace kvs
