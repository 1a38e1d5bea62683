// engine_bench: prefill and decode throughput of the forward pass for one
// model file, printed as a table (medians over repeated runs).
//
//   build/bin/kvs-bench-engine --model M.gguf [--prompt 128] [--gen 64]
//       [--repeats 5] [--threads N] [--kv-type f16|f32]
//
// Prefill: one sequence, `prompt` random tokens in chunks of 512.
// Decode: `gen` single-token steps after the prompt.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <vector>

#include "cache/kv_sequence.h"
#include "client/cli_args.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "model/transformer.h"

namespace kvs {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
}

int Main(int argc, char** argv) {
  auto args = CliArgs::Parse(std::vector<std::string>(argv + 1, argv + argc),
                             {"model", "prompt", "gen", "repeats", "threads", "kv-type"}, {});
  if (!args.ok() || !args->Has("model")) {
    std::cerr << "usage: kvs-bench-engine --model M.gguf [--prompt 128] [--gen 64] [--repeats 5] "
                 "[--threads N] [--kv-type f16|f32]\n";
    return 2;
  }
  const int prompt = static_cast<int>(args->GetInt("prompt", 128).value_or(128));
  const int gen = static_cast<int>(args->GetInt("gen", 64).value_or(64));
  const int repeats = static_cast<int>(args->GetInt("repeats", 5).value_or(5));
  const int threads = static_cast<int>(args->GetInt("threads", 0).value_or(0));
  const KvDtype dtype = args->GetOr("kv-type", "f16") == "f32" ? KvDtype::kF32 : KvDtype::kF16;

  auto model = Model::Load(*args->Get("model"));
  if (!model.ok()) {
    std::cerr << model.status().message() << "\n";
    return 1;
  }
  std::cerr << (*model)->Summary() << "\n";
  const ModelConfig& c = (*model)->config();
  ThreadPool pool(threads);
  Transformer t(c, (*model)->weights(), &pool, 512, c.context_length);
  PagePool pages(t.kv_geometry(16, dtype), (prompt + gen) / 16 + 2);
  std::vector<float> logits(c.vocab_size);
  std::mt19937 rng(1);
  std::vector<int32_t> tokens(prompt);
  for (int32_t& x : tokens) x = static_cast<int32_t>(rng() % c.vocab_size);

  std::vector<double> prefill_tok_s, decode_tok_s;
  for (int r = 0; r < repeats; ++r) {
    KvSequence kv(&pages);
    auto start = Clock::now();
    for (int i = 0; i < prompt; i += 512) {
      ForwardItem item{&kv, std::span<const int32_t>(tokens).subspan(i, std::min(512, prompt - i))};
      if (!t.Forward({&item, 1}, logits.data()).ok()) return 1;
    }
    prefill_tok_s.push_back(prompt / std::chrono::duration<double>(Clock::now() - start).count());
    start = Clock::now();
    for (int g = 0; g < gen; ++g) {
      const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      ForwardItem item{&kv, {&next, 1}};
      if (!t.Forward({&item, 1}, logits.data()).ok()) return 1;
    }
    decode_tok_s.push_back(gen / std::chrono::duration<double>(Clock::now() - start).count());
  }
  const double weight_mb = static_cast<double>((*model)->weights().matrix_bytes) / 1e6;
  std::printf("| model | threads | kv | prefill tok/s (%d) | decode tok/s (ctx %d) | weights MB/token | decode GB/s |\n",
              prompt, prompt);
  std::printf("|---|---|---|---|---|---|---|\n");
  std::printf("| %s | %d | %s | %.1f | %.1f | %.1f | %.2f |\n", c.name.c_str(), pool.size(),
              KvDtypeName(dtype), Median(prefill_tok_s), Median(decode_tok_s), weight_mb,
              Median(decode_tok_s) * weight_mb / 1000);
  return 0;
}

}  // namespace
}  // namespace kvs

int main(int argc, char** argv) { return kvs::Main(argc, argv); }
