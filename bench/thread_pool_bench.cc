// kvs-bench-kernels cases for what one ThreadPool::Run costs against the
// per-row work a forward pass hands it, on a pool of one thread per
// available core (the engine's), µs per call:
//   thread_pool/run/empty/<n>tasks        Run of n tasks that do nothing:
//                                         the hand-off and the wait alone
//   thread_pool/rms_norm/<way>/<r>rows    RmsNorm of r rows of 1,024 (a
//                                         layer's norms at the model's dim)
//   thread_pool/silu_mul/<way>/<r>rows    SiluMul of r rows of 3,072 (the
//                                         feed-forward's gate)
//   thread_pool/add/<way>/<r>rows         AddInPlace of r rows of 1,024
//                                         (a residual add)
//   thread_pool/sched_yield               one sched_yield() with nothing else
//                                         to run: what a waiting thread gives
//                                         up each time it yields (ThreadPool
//                                         yields every kPausesPerYield = 64
//                                         pauses)
//   thread_pool/pause/64                  the 64 pauses it spins between
//                                         (x86 only)
// <way> is `pool` (one task per row, as transformer.cc runs them) or
// `inline` (the calling thread, row after row). r = 1 is decode, 8 a
// fan-out step of 8 forks, 64 a short prefill chunk. A forward pass runs
// about 14 Runs per layer, 392 per step of the 28-layer model.
#include <benchmark/benchmark.h>
#include <sched.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <string>
#include <vector>

#include "kernels/activation.h"
#include "kernels/norm.h"
#include "model/thread_pool.h"

namespace kvs {
namespace {

ThreadPool& Pool() {
  static ThreadPool pool(0);
  return pool;
}

struct Rows {
  explicit Rows(int n_rows, int width) : width(width), x(static_cast<size_t>(n_rows) * width), y(x.size()) {
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = 0.001f * static_cast<float>(i % 977) - 0.4f;
      y[i] = 0.002f * static_cast<float>(i % 613) - 0.5f;
    }
  }
  float* row_x(int r) { return x.data() + static_cast<size_t>(r) * width; }
  float* row_y(int r) { return y.data() + static_cast<size_t>(r) * width; }
  int width;
  std::vector<float> x, y;
};

void SchedYield(benchmark::State& state) {
  for (auto _ : state) sched_yield();
}

#if defined(__x86_64__)
void Pauses(benchmark::State& state, int n) {
  for (auto _ : state) {
    for (int i = 0; i < n; ++i) _mm_pause();
  }
}
#endif

void RunEmpty(benchmark::State& state, int n_tasks) {
  ThreadPool& pool = Pool();
  for (auto _ : state) pool.Run(n_tasks, [](int, int) {});
}

// `row_fn(rows, r)` for every row, through the pool or inline.
template <class RowFn>
void RunRows(benchmark::State& state, bool through_pool, int n_rows, int width, RowFn row_fn) {
  ThreadPool& pool = Pool();
  Rows rows(n_rows, width);
  for (auto _ : state) {
    if (through_pool) {
      pool.Run(n_rows, [&](int r, int) { row_fn(rows, r); });
    } else {
      for (int r = 0; r < n_rows; ++r) row_fn(rows, r);
    }
    benchmark::DoNotOptimize(rows.x.data());
    benchmark::DoNotOptimize(rows.y.data());
  }
}

void RmsNormCase(benchmark::State& state, bool through_pool, int n_rows) {
  std::vector<float> weight(1024, 1.0f);
  RunRows(state, through_pool, n_rows, 1024,
          [&](Rows& rows, int r) { RmsNorm(rows.row_x(r), weight.data(), 1e-6f, 1024, rows.row_y(r)); });
}

void SiluMulCase(benchmark::State& state, bool through_pool, int n_rows) {
  // The gate shrinks to zeros within the first iterations (|up| < 1); the
  // SIMD SiLU's time does not depend on the values.
  RunRows(state, through_pool, n_rows, 3072, [](Rows& rows, int r) { SiluMul(rows.row_x(r), rows.row_y(r), 3072); });
}

void AddCase(benchmark::State& state, bool through_pool, int n_rows) {
  RunRows(state, through_pool, n_rows, 1024, [](Rows& rows, int r) { AddInPlace(rows.row_y(r), rows.row_x(r), 1024); });
}

const bool registered = [] {
  const auto configure = [](benchmark::internal::Benchmark* b) {
    b->Repetitions(5)->ReportAggregatesOnly(true)->UseRealTime()->Unit(benchmark::kMicrosecond);
  };
  configure(benchmark::RegisterBenchmark("thread_pool/sched_yield", SchedYield));
#if defined(__x86_64__)
  configure(benchmark::RegisterBenchmark("thread_pool/pause/64", Pauses, 64));
#endif
  for (int n : {2, 8}) {
    configure(benchmark::RegisterBenchmark(("thread_pool/run/empty/" + std::to_string(n) + "tasks").c_str(), RunEmpty,
                                           n));
  }
  for (int rows : {1, 8, 64}) {
    for (bool through_pool : {true, false}) {
      const std::string suffix = std::string(through_pool ? "pool/" : "inline/") + std::to_string(rows) + "rows";
      configure(benchmark::RegisterBenchmark(("thread_pool/rms_norm/" + suffix).c_str(), RmsNormCase, through_pool,
                                             rows));
      configure(benchmark::RegisterBenchmark(("thread_pool/silu_mul/" + suffix).c_str(), SiluMulCase, through_pool,
                                             rows));
      configure(benchmark::RegisterBenchmark(("thread_pool/add/" + suffix).c_str(), AddCase, through_pool, rows));
    }
  }
  return true;
}();

}  // namespace
}  // namespace kvs
