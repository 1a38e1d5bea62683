// kvs-bench --one-row: one row of the long suite (long_suite.h), run on its
// own `--runs` times with each run's rate printed as it ends, so that a
// profiler sees that row and nothing else of the suite:
//
//   perf record -g -- build/bin/kvs-bench --model M.gguf --kv-type q8_0
//       --one-row prefill:8192 [--runs 1] [--threads N] [--amx-attention]
//
// --amx-attention folds the row's attention on AMX as kvsessiond's flag
// does (exit code 1 where the CPU has no AMX-BF16); the header on stderr
// names the attention the row runs (amx or vector).
//
// Rows (the suite's shapes; EngineBench's chunks, pages and warm pool):
//   prefill:N   an N-token prompt of random tokens, prefilled in chunks
//               of EngineBench::kChunk (tok/s);
//   decode:N    kDecodeSteps greedy steps of one row on an N-token
//               context (tok/s; N = 0: a one-token prompt);
//   fan-out:B   B forks of a kFanOutPrompt-token prompt decoding
//               kFanOutTokens tokens each in one batch per step
//               (aggregate tok/s).
// (The constants are the suite's, long_suite.h: 32 steps, a 512-token
// prompt, 64 tokens.)
// The setup a row needs (loading the model, the context's prefill) comes
// first and is announced on stderr, so `perf record -D MS` can skip it.
// A bad flag or row prints the usage on stderr (exit code 2); a model
// that does not load, a context longer than the model's, or
// --amx-attention without AMX, exit code 1.
#ifndef KVSESSION_BENCH_ONE_ROW_H_
#define KVSESSION_BENCH_ONE_ROW_H_

namespace kvs {

// Whether argv asks for --one-row.
bool WantsOneRow(int argc, char** argv);
// Parses the flags above and runs the row; returns the exit code.
int OneRowMain(int argc, char** argv);

}  // namespace kvs

#endif  // KVSESSION_BENCH_ONE_ROW_H_
