#include "service/task_executor.h"

#include <pthread.h>

namespace kvs {

TaskExecutor::TaskExecutor(int n_threads) {
  for (int i = 0; i < n_threads; ++i) threads_.emplace_back([this] { Loop(); });
}

TaskExecutor::~TaskExecutor() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void TaskExecutor::Submit(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
}

void TaskExecutor::Loop() {
  pthread_setname_np(pthread_self(), "kvs-io");  // top -H, perf
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](TaskExecutor* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) {
            return e->stopping_ || !e->tasks_.empty();
          },
          this));
      if (tasks_.empty()) return;  // stopping and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace kvs
