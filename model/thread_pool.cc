#include "model/thread_pool.h"

#include <pthread.h>

#include <chrono>

#include "kernels/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define KVS_CPU_RELAX() _mm_pause()
#else
#define KVS_CPU_RELAX() std::this_thread::yield()
#endif

namespace kvs {
namespace {

// How long an idle worker polls for the next Run before it sleeps.
constexpr auto kSpinBudget = std::chrono::microseconds(200);
// Busy-wait iterations between yields: when the machine is oversubscribed
// (more runnable threads than cores) a spinning thread must give the core
// to the thread it is waiting for.
constexpr int kPausesPerYield = 64;

constexpr uint64_t kClosed = 1ull << 31;
constexpr uint64_t kInsideMask = kClosed - 1;

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = AvailableCores();
  if (n_threads < 1) n_threads = 1;
  spans_ = std::make_unique<Span[]>(n_threads);
  workers_.reserve(n_threads - 1);
  for (int t = 1; t < n_threads; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void ThreadPool::DrainTasks(int thread) {
  if (in_spans_) return DrainSpans(thread);
  for (;;) {
    const int task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= n_tasks_) return;
    (*job_)(task, thread);
  }
}

int ThreadPool::TakeFront(int s) {
  uint64_t b = spans_[s].bounds.load(std::memory_order_relaxed);
  for (;;) {
    const uint32_t front = static_cast<uint32_t>(b), back = static_cast<uint32_t>(b >> 32);
    if (front >= back) return -1;
    if (spans_[s].bounds.compare_exchange_weak(b, b + 1, std::memory_order_relaxed)) {
      return static_cast<int>(front);
    }
  }
}

int ThreadPool::TakeBack(int s) {
  uint64_t b = spans_[s].bounds.load(std::memory_order_relaxed);
  for (;;) {
    const uint32_t front = static_cast<uint32_t>(b), back = static_cast<uint32_t>(b >> 32);
    if (front >= back) return -1;
    if (spans_[s].bounds.compare_exchange_weak(b, b - (uint64_t{1} << 32), std::memory_order_relaxed)) {
      return static_cast<int>(back - 1);
    }
  }
}

void ThreadPool::DrainSpans(int thread) {
  for (int task = TakeFront(thread); task >= 0; task = TakeFront(thread)) (*job_)(task, thread);
  // Then help the others: the back task of the span with the most left.
  for (;;) {
    int victim = -1;
    int64_t most = 0;
    for (int s = 0; s < size(); ++s) {
      const uint64_t b = spans_[s].bounds.load(std::memory_order_relaxed);
      const int64_t left = static_cast<int64_t>(b >> 32) - static_cast<int64_t>(static_cast<uint32_t>(b));
      if (left > most) most = left, victim = s;
    }
    if (victim < 0) return;
    const int task = TakeBack(victim);
    if (task >= 0) (*job_)(task, thread);
  }
}

void ThreadPool::Run(int n_tasks, absl::FunctionRef<void(int task, int thread)> fn) {
  RunJob(n_tasks, fn, /*in_spans=*/false);
}

void ThreadPool::RunInSpans(int n_tasks, absl::FunctionRef<void(int task, int thread)> fn) {
  RunJob(n_tasks, fn, /*in_spans=*/true);
}

void ThreadPool::RunJob(int n_tasks, const absl::FunctionRef<void(int, int)>& fn, bool in_spans) {
  if (n_tasks <= 0) return;
  if (workers_.empty() || n_tasks == 1) {
    for (int t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  // Publish the job, then open it: workers that wake for this generation
  // register in job_state_ before touching it.
  job_ = &fn;
  n_tasks_ = n_tasks;
  in_spans_ = in_spans;
  next_task_.store(0, std::memory_order_relaxed);
  if (in_spans) {
    for (int t = 0; t < size(); ++t) {
      const uint64_t front = t == 0 ? 0 : static_cast<uint32_t>(SpanEnd(n_tasks, t - 1));
      spans_[t].bounds.store((static_cast<uint64_t>(SpanEnd(n_tasks, t)) << 32) | front,
                             std::memory_order_relaxed);
    }
  }
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  job_state_.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);
  generation_.store(gen, std::memory_order_release);
  generation_.notify_all();

  DrainTasks(0);

  // Close the job: late workers will not enter; wait only for those inside,
  // each finishing the task it holds.
  uint64_t s = job_state_.fetch_or(kClosed, std::memory_order_acq_rel);
  for (int i = 0; (s & kInsideMask) != 0; ++i) {
    if (i % kPausesPerYield == kPausesPerYield - 1) {
      std::this_thread::yield();
    } else {
      KVS_CPU_RELAX();
    }
    s = job_state_.load(std::memory_order_acquire);
  }
  job_ = nullptr;
}

void ThreadPool::WorkerLoop(int thread) {
  pthread_setname_np(pthread_self(), "kvs-compute");  // top -H, perf
  // Workers start at generation 0, set before any Run or the destructor can
  // bump it.
  uint32_t seen = 0;
  for (;;) {
    // Poll for a while (Runs of one forward pass come back to back), then
    // sleep until the generation changes.
    const auto spin_until = std::chrono::steady_clock::now() + kSpinBudget;
    uint32_t now = generation_.load(std::memory_order_acquire);
    for (int i = 0; now == seen; ++i) {
      if (i % kPausesPerYield == kPausesPerYield - 1) {
        if (std::chrono::steady_clock::now() > spin_until) {
          generation_.wait(seen, std::memory_order_acquire);
        } else {
          std::this_thread::yield();
        }
      } else {
        KVS_CPU_RELAX();
      }
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stop_.load(std::memory_order_acquire)) return;
    // Enter the job of generation `seen` if it is still open.
    uint64_t s = job_state_.load(std::memory_order_acquire);
    bool entered = false;
    while ((s >> 32) == seen && (s & kClosed) == 0) {
      if (job_state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) {
        entered = true;
        break;
      }
    }
    if (!entered) continue;
    DrainTasks(thread);
    job_state_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace kvs
