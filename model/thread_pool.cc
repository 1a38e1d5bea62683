#include "model/thread_pool.h"

#include <sched.h>

#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#define KVS_CPU_RELAX() _mm_pause()
#else
#define KVS_CPU_RELAX() std::this_thread::yield()
#endif

namespace kvs {
namespace {

// How long an idle worker polls for the next Run before it sleeps.
constexpr auto kSpinBudget = std::chrono::microseconds(300);

}  // namespace

int ThreadPool::AvailableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = AvailableCores();
  if (n_threads < 1) n_threads = 1;
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
  for (;;) {
    const int task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= n_tasks_) return;
    (*job_)(task, thread);
  }
}

void ThreadPool::Run(int n_tasks, absl::FunctionRef<void(int task, int thread)> fn) {
  if (n_tasks <= 0) return;
  if (workers_.empty() || n_tasks == 1) {
    for (int t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  job_ = &fn;
  n_tasks_ = n_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  workers_busy_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  DrainTasks(0);
  while (workers_busy_.load(std::memory_order_acquire) != 0) KVS_CPU_RELAX();
  job_ = nullptr;
}

void ThreadPool::WorkerLoop(int thread) {
  // Workers start at generation 0 (set before any Run or the destructor can
  // bump it), so a Run issued before this thread first looks is not missed.
  uint32_t seen = 0;
  for (;;) {
    // Spin for a short while, then sleep until the generation changes.
    auto spin_until = std::chrono::steady_clock::now() + kSpinBudget;
    uint32_t now = generation_.load(std::memory_order_acquire);
    for (int i = 0; now == seen; ++i) {
      KVS_CPU_RELAX();
      if ((i & 255) == 255 && std::chrono::steady_clock::now() > spin_until) {
        generation_.wait(seen, std::memory_order_acquire);
      }
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stop_.load(std::memory_order_acquire)) return;
    DrainTasks(thread);
    workers_busy_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace kvs
