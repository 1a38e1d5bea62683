// TaskExecutor: a few threads that run blocking work (RocksDB writes, KV
// loads from disk) off gRPC's callback threads and off the engine's step
// loop. Tasks run in submission order per thread pick-up (no ordering
// guarantee across threads).
//
// Its threads are named "kvs-io" (top -H, perf).
//
// Ownership: owns its threads; the destructor runs the tasks already queued,
// then joins.
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
  explicit TaskExecutor(int n_threads);
  ~TaskExecutor();
  TaskExecutor(const TaskExecutor&) = delete;
  TaskExecutor& operator=(const TaskExecutor&) = delete;

  void Submit(std::function<void()> task);
  // How many threads run the tasks (how many may run at once).
  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_TASK_EXECUTOR_H_
