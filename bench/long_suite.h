// kvs-bench --suite long: every engine row of issue 11 ("long conversations
// at hardware speed") on one model, in one table, each with its target and
// whether this run meets it:
//   - prefill tok/s of 512, 2,000, 4,096 and 8,192-token prompts (8,192 at
//     least 60% of the 512 rate);
//   - decode tok/s at context 0, 4,096 and 16,384 (16,384 skipped with
//     --quick), with the share of the memory read bandwidth measured in the
//     same run (weights + KV bytes read per token x tok/s / bandwidth);
//   - 8 forks x 64 tokens on a 512-token prompt, decoded together: aggregate
//     tok/s and the ratio to one stream (target 5x).
// llama.cpp's column holds the figures of issue 11's table (measured on a
// Zen 4 machine, not in this run), or with --llama-cpp DIR --llama-model
// TWIN.gguf llama.cpp's own llama-batched-bench run in this run after
// kvsession's rows (llama_cpp_figures.h); targets stated against llama.cpp
// are judged on that column.
//
//   build/bin/kvs-bench --model M.gguf --suite long [--runs 3] [--rounds 1]
//       [--threads N] [--quick] [--kv-type f16|bf16|q8_0|f32] [--amx-attention]
//       [--llama-cpp LLAMA_CPP/build/bin --llama-model TWIN.gguf]
//
// With another --kv-type than f16 the table gains a row for the KV bytes
// per token against f16's (the sessions a GiB holds).
//
// Medians of --runs. With --rounds R, every row is measured R times,
// kvsession's rows and llama.cpp's run alternating round by round (on a
// shared machine the speed drifts over the minutes a suite takes); each
// figure is then the median over the rounds, each ratio the median of the
// rounds' ratios (the figure targets are judged on), and each verdict says
// in how many rounds the target held. Takes minutes per round (a
// 16,384-token context is prefilled; --quick skips it).
#ifndef KVSESSION_BENCH_LONG_SUITE_H_
#define KVSESSION_BENCH_LONG_SUITE_H_

#include <string>

#include "kernels/kv_dtype.h"

namespace kvs {

// The rows' shapes (shared with kvs-bench --one-row, one_row.h): decode
// rows take kDecodeSteps steps; the fan-out row's kFanOutBranches forks of
// a kFanOutPrompt-token prompt decode kFanOutTokens tokens each, against
// one stream.
inline constexpr int kDecodeSteps = 32;
inline constexpr int kFanOutPrompt = 512;
inline constexpr int kFanOutBranches = 8;
inline constexpr int kFanOutTokens = 64;

struct LongSuiteOptions {
  std::string model;
  int runs = 3;
  int rounds = 1;      // kvsession's rows, then llama.cpp's, this many times
  int threads = 0;     // 0: one per core
  bool quick = false;  // skip decode at 16,384
  KvDtype kv_dtype = KvDtype::kF16;
  bool amx_attention = false;  // attention.h UseAmxAttention
  std::string llama_cpp_dir;  // empty: issue 11's llama.cpp figures
  std::string llama_model;
};

// `kvs-bench --suite long ...`: parses the flags above (bad ones: usage on
// stderr, exit code 2) and runs the suite.
bool WantsSuite(int argc, char** argv);
int LongSuiteMain(int argc, char** argv);

// Prints the table to stdout; returns a process exit code (1 with a message
// on stderr if the model does not load or a forward pass fails).
int RunLongSuite(const LongSuiteOptions& options);

}  // namespace kvs

#endif  // KVSESSION_BENCH_LONG_SUITE_H_
