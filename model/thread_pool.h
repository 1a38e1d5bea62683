// ThreadPool: a fixed set of persistent worker threads for data-parallel
// loops inside one forward pass.
//
// Run(n_tasks, fn) calls fn(task, thread) once for every task in
// [0, n_tasks), handing tasks out dynamically (an atomic counter), and
// returns when all are done. The calling thread takes part as thread 0;
// workers are threads 1..size()-1, so per-thread scratch is indexed by
// `thread`. Nothing is allocated per Run.
//
// RunInSpans(n_tasks, fn) does the same with another order: the tasks are
// cut into size() contiguous spans (SpanEnd), thread t runs span t from
// its front, in ascending order, and a thread whose span is done takes
// tasks from the back of the span with the most left. So while no thread
// falls behind, a thread's next task is the one after its current task,
// and a task may prepare that one (ask for its memory into this core's
// caches). A task taken from another thread's span is the last one left
// there, and its successor is not its thief's to run.
//
// Between Runs, workers spin briefly (a forward pass issues hundreds of
// Runs back to back) and then sleep on a futex, so an idle pool costs no CPU.
// Run never waits for a worker that has not started on the job: it closes
// the job after draining the tasks itself and waits only for workers that
// hold a task, so an oversubscribed machine degrades gracefully.
//
// Workers are named "kvs-compute" (top -H, perf).
//
// Thread safety: Run must not be called concurrently or re-entrantly; one
// owner (the engine's step loop) drives the pool.
#ifndef KVSESSION_MODEL_THREAD_POOL_H_
#define KVSESSION_MODEL_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace kvs {

class ThreadPool {
 public:
  // `n_threads` counts the caller; 0 means one per core this process may
  // run on (AvailableCores, kernels/cpu_features.h).
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void Run(int n_tasks, absl::FunctionRef<void(int task, int thread)> fn);
  void RunInSpans(int n_tasks, absl::FunctionRef<void(int task, int thread)> fn);

  // The end (exclusive) of `thread`'s span of RunInSpans(n_tasks, ...); its
  // span begins at SpanEnd(n_tasks, thread - 1), thread 0's at 0.
  int SpanEnd(int n_tasks, int thread) const {
    return static_cast<int>(static_cast<int64_t>(n_tasks) * (thread + 1) / size());
  }

 private:
  // A span of RunInSpans: (back << 32) | front, tasks [front, back) left.
  struct alignas(64) Span {
    std::atomic<uint64_t> bounds{0};
  };

  void RunJob(int n_tasks, const absl::FunctionRef<void(int, int)>& fn, bool in_spans);
  void WorkerLoop(int thread);
  void DrainTasks(int thread);
  void DrainSpans(int thread);
  // Takes the front task of span `s` (the owner) or its back task (a
  // thief); -1 when the span is empty.
  int TakeFront(int s);
  int TakeBack(int s);

  std::vector<std::thread> workers_;
  // The current job; written by Run before `generation_` is bumped.
  const absl::FunctionRef<void(int, int)>* job_ = nullptr;
  int n_tasks_ = 0;
  std::atomic<int> next_task_{0};
  bool in_spans_ = false;
  std::unique_ptr<Span[]> spans_;  // size() of them
  // (generation << 32) | closed bit (1 << 31) | workers inside the job.
  std::atomic<uint64_t> job_state_{0};
  std::atomic<uint32_t> generation_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_THREAD_POOL_H_
