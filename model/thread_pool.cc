#include "model/thread_pool.h"

#include <pthread.h>
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
constexpr auto kSpinBudget = std::chrono::microseconds(200);
// Busy-wait iterations between yields: when the machine is oversubscribed
// (more runnable threads than cores) a spinning thread must give the core
// to the thread it is waiting for.
constexpr int kPausesPerYield = 64;

constexpr uint64_t kClosed = 1ull << 31;
constexpr uint64_t kInsideMask = kClosed - 1;

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
  // Publish the job, then open it: workers that wake for this generation
  // register in job_state_ before touching it.
  job_ = &fn;
  n_tasks_ = n_tasks;
  next_task_.store(0, std::memory_order_relaxed);
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
