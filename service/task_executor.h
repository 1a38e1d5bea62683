// TaskExecutor: a few threads that run blocking work (RocksDB writes, KV
// loads from disk) off gRPC's callback threads and off the engine's step
// loop. Tasks run in submission order per thread pick-up (no ordering
// guarantee across threads).
//
// Waits: a task that waits for something other than its own work (a busy
// session to be released, KV memory to be freed by running calls) marks
// the wait with a BlockingWait. While it waits it does not count against
// the executor's threads: queued tasks start on another thread, a spare
// one started on demand (at most `max_spare_threads` of them; they stay,
// idle, once started). So a few calls waiting for a busy session cannot
// hold up every other call. Past the spares, tasks queue as before.
// When the waits end, more than `n_threads` tasks may run for a while; no
// further task starts until fewer do.
//
// Its threads are named `thread_name` ("kvs-io" unless given; top -H, perf).
//
// Ownership: owns its threads; the destructor runs the tasks already queued,
// then joins. Thread-safe.
#ifndef KVSESSION_SERVICE_TASK_EXECUTOR_H_
#define KVSESSION_SERVICE_TASK_EXECUTOR_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace kvs {

class TaskExecutor {
 public:
  explicit TaskExecutor(int n_threads, int max_spare_threads = 32, const char* thread_name = "kvs-io");
  ~TaskExecutor();
  TaskExecutor(const TaskExecutor&) = delete;
  TaskExecutor& operator=(const TaskExecutor&) = delete;

  void Submit(std::function<void()> task);
  // How many tasks run at once outside waits (n_threads).
  int threads() const { return n_threads_; }
  // Threads started so far, spares included (tests, diagnostics).
  int started_threads() const;
  // Tasks submitted and not yet started.
  int queued() const;

 private:
  friend class BlockingWait;
  void Loop();
  void StartThreadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartSpareIfNeededLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void BeginWait();
  void EndWait();

  const int n_threads_;
  const char* const thread_name_;  // at most 15 characters
  const int max_threads_;  // n_threads + max_spare_threads
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int running_ ABSL_GUARDED_BY(mu_) = 0;  // threads running a task
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;  // of those, inside a BlockingWait
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

// Marks the calling task as waiting until destroyed (see above). Does
// nothing on a thread that is not a TaskExecutor's. Nests.
class BlockingWait {
 public:
  BlockingWait();
  ~BlockingWait();
  BlockingWait(const BlockingWait&) = delete;
  BlockingWait& operator=(const BlockingWait&) = delete;

 private:
  TaskExecutor* const executor_;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_TASK_EXECUTOR_H_
