// MatmulTaskRows: how many weight rows each task of one MatmulGroup call
// takes, so that ThreadPool::RunInSpans gives every thread as many rows.
//
// RunInSpans cuts a call's tasks into one contiguous span a thread by their
// count (ThreadPool::SpanEnd), and a thread that finishes its span early
// can only take a task the other has not started: with tasks of 192 rows
// (the packed GEMM's shortest call for 2-16 input rows), a 1,024-row matrix
// is 6 tasks, the last of 64 rows, and its two spans hold 576 and 448 rows,
// so one thread waits a sixth of the call for the other.
//
// EvenOutSpans(threads, rows, chunk) takes each matrix's proposed task rows
// (`chunk[i]` for the matrix of `rows[i]` rows: the matrix is cut into
// ceil(rows / chunk) tasks, the last one shorter, in matrix order) and,
// when the largest span would carry more than 1/32 beyond an even share,
// looks for one task length for every matrix, from the largest proposed
// chunk up to twice it in steps of 16 rows, whose largest span carries the
// fewest rows; it takes that length only when it beats the proposal by
// more than that margin (calls of more than kMaxSpanMatrices matrices keep
// their proposal). So a task is never shorter than proposed, never
// more than twice the largest proposal, and a call already near even keeps
// its cut. The rows each task covers change, never what any row computes:
// a matmul's output row is the same whichever task computes it.
//
// SpanRows(threads, rows, chunk) is the rows of the largest span under a
// cut, the figure EvenOutSpans lowers (the tests read it too).
//
// Cost: SpanRows walks the call's tasks once. EvenOutSpans does that, and
// only for an uneven proposal one walk per candidate length (at most
// longest / 16 + 1: 13 walks of 4-6 tasks for fan-out's 192-row tasks), so
// MatmulGroup runs it on every call rather than keeping the cuts.
//
// Pure functions; no allocation.
#ifndef KVSESSION_MODEL_MATMUL_TASK_ROWS_H_
#define KVSESSION_MODEL_MATMUL_TASK_ROWS_H_

#include <cstddef>
#include <cstdint>
#include <span>

namespace kvs {

inline constexpr size_t kMaxSpanMatrices = 4;

int64_t SpanRows(int threads, std::span<const int64_t> rows, std::span<const int64_t> chunk);

void EvenOutSpans(int threads, std::span<const int64_t> rows, std::span<int64_t> chunk);

}  // namespace kvs

#endif  // KVSESSION_MODEL_MATMUL_TASK_ROWS_H_
