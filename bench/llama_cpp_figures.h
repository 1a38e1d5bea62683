// llama.cpp's figures for the rows of kvs-bench --suite long, either the
// ones issue 11 quotes (measured on a Zen 4 machine, not in this run) or
// measured in this run by a llama.cpp build the caller points at, so the
// table compares the two side by side on the same machine and sitting.
//
// Measuring runs llama.cpp's own `llama-batched-bench` (one sequence:
// prompts of 1, 512, 2,000, 4,096 and 8,192 tokens, then 32 tokens of
// decode after each, and with `long_context` 16,384; then 8 sequences
// decoding 64 tokens each after one shared 512-token prompt) with batch
// 2048, ubatch 512 and `threads` threads, and reads its `--output-format
// jsonl` lines. A build that takes `-fa on|off|auto` is run with flash
// attention on and off and each row keeps the faster (on is faster at
// prefill, off at long-context decode), and its 8 sequences share one
// unified cache (-kvu, so the prompt's cells are shared, as forks share
// pages); an older one (build 4748) runs with its defaults (flash attention
// off, one unified cache). llama.cpp
// must be given a model it can load with the same shape (build 4748 has
// no qwen3 architecture: a llama-architecture twin, `kvs-synth-model
// --arch llama` with the same flags, differs only by Q/K norm; newer builds
// load the qwen3 file itself). Each figure is one llama.cpp run, not a
// median.
//
// Benchmark code: a llama.cpp that fails or prints no figures is an error
// (the caller prints it and exits).
#ifndef KVSESSION_BENCH_LLAMA_CPP_FIGURES_H_
#define KVSESSION_BENCH_LLAMA_CPP_FIGURES_H_

#include <string>

#include "absl/status/statusor.h"

namespace kvs {
namespace bench {

struct LlamaCppFigures {
  std::string source;     // for the table's header
  bool measured = false;  // this run (true) or issue 11's table
  // tok/s; 0 where there is no figure.
  double pp512 = 0, pp2000 = 0, pp4096 = 0, pp8192 = 0;
  double tg0 = 0, tg4096 = 0, tg16384 = 0;  // one stream, decode at that context
  double batched8 = 0;                      // 8 streams on a shared 512-token prompt, aggregate
};

// Issue 11's figures (2-core AMD EPYC, Zen 4).
LlamaCppFigures IssueElevenFigures();

struct LlamaCppRun {
  std::string bin_dir;  // holds llama-batched-bench
  std::string model;    // a GGUF llama.cpp loads, of the model's shape
  int threads = 2;
  bool long_context = true;  // also decode at 16,384
};

absl::StatusOr<LlamaCppFigures> MeasureLlamaCpp(const LlamaCppRun& run);

}  // namespace bench
}  // namespace kvs

#endif  // KVSESSION_BENCH_LLAMA_CPP_FIGURES_H_
