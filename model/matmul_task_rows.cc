#include "model/matmul_task_rows.h"

#include <algorithm>
#include <array>

namespace kvs {
namespace {

constexpr int64_t kRowStep = 16;    // task lengths stay whole row groups
constexpr int64_t kMarginParts = 32;  // a cut within 1/32 of even is kept

int64_t Tasks(int64_t rows, int64_t chunk) { return (rows + chunk - 1) / chunk; }

}  // namespace

int64_t SpanRows(int threads, std::span<const int64_t> rows, std::span<const int64_t> chunk) {
  int64_t n_tasks = 0;
  for (size_t i = 0; i < rows.size(); ++i) n_tasks += Tasks(rows[i], chunk[i]);
  // Walk the tasks in order, adding each to the span ThreadPool::SpanEnd
  // puts it in (thread t: tasks [n * t / T, n * (t + 1) / T)).
  int64_t largest = 0, current = 0, task = 0;
  int thread = 0;
  int64_t span_end = n_tasks / threads;
  for (size_t i = 0; i < rows.size(); ++i) {
    for (int64_t r0 = 0; r0 < rows[i]; r0 += chunk[i], ++task) {
      while (thread + 1 < threads && task >= span_end) {
        largest = std::max(largest, current);
        current = 0;
        ++thread;
        span_end = n_tasks * (thread + 1) / threads;
      }
      current += std::min(chunk[i], rows[i] - r0);
    }
  }
  return std::max(largest, current);
}

void EvenOutSpans(int threads, std::span<const int64_t> rows, std::span<int64_t> chunk) {
  if (threads <= 1 || rows.empty() || rows.size() > kMaxSpanMatrices) return;
  int64_t total = 0, longest = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    total += rows[i];
    longest = std::max(longest, chunk[i]);
  }
  const int64_t even = (total + threads - 1) / threads;
  const int64_t margin = even / kMarginParts;
  const int64_t proposed = SpanRows(threads, rows, chunk);
  if (proposed <= even + margin) return;
  int64_t best = proposed, best_chunk = 0;
  for (int64_t c = (longest + kRowStep - 1) / kRowStep * kRowStep; c <= 2 * longest; c += kRowStep) {
    std::array<int64_t, kMaxSpanMatrices> cut;
    cut.fill(c);
    const int64_t span = SpanRows(threads, rows, std::span<const int64_t>(cut.data(), rows.size()));
    if (span < best) {
      best = span;
      best_chunk = c;
    }
  }
  if (best_chunk == 0 || best >= proposed - margin) return;
  for (int64_t& c : chunk) c = best_chunk;
}

}  // namespace kvs
