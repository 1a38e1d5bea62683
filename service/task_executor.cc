#include "service/task_executor.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

namespace kvs {
namespace {

// The executor whose task the calling thread runs (null elsewhere), and
// how deep in BlockingWaits it is (only the outermost one counts).
thread_local TaskExecutor* current_executor = nullptr;
thread_local int wait_depth = 0;

}  // namespace

TaskExecutor::TaskExecutor(int n_threads, int max_spare_threads, const char* thread_name)
    : n_threads_(n_threads), thread_name_(thread_name), max_threads_(n_threads + max_spare_threads) {
  absl::MutexLock lock(&mu_);
  for (int i = 0; i < n_threads; ++i) StartThreadLocked();
}

TaskExecutor::~TaskExecutor() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // A task still running may start a spare thread: join until none is left.
  for (;;) {
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      threads.swap(threads_);
    }
    if (threads.empty()) return;
    for (std::thread& t : threads) t.join();
  }
}

int TaskExecutor::started_threads() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(threads_.size());
}

int TaskExecutor::queued() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(tasks_.size());
}

void TaskExecutor::Submit(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
  StartSpareIfNeededLocked();
}

void TaskExecutor::StartThreadLocked() { threads_.emplace_back([this] { Loop(); }); }

void TaskExecutor::StartSpareIfNeededLocked() {
  // Queued tasks that may start now (fewer than n_threads run outside
  // waits) and more of them than idle threads to take them.
  const int started = static_cast<int>(threads_.size());
  const int idle = started - running_;
  const int may_start = std::min(static_cast<int>(tasks_.size()), n_threads_ - (running_ - waiting_));
  // Also while stopping: the destructor runs the queued tasks, and one
  // waiting for another needs a spare then too (it joins late threads).
  if (idle < may_start && started < max_threads_) StartThreadLocked();
}

void TaskExecutor::BeginWait() {
  absl::MutexLock lock(&mu_);
  ++waiting_;
  StartSpareIfNeededLocked();
}

void TaskExecutor::EndWait() {
  absl::MutexLock lock(&mu_);
  --waiting_;
}

void TaskExecutor::Loop() {
  pthread_setname_np(pthread_self(), thread_name_);  // top -H, perf
  current_executor = this;
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](TaskExecutor* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) {
            if (e->tasks_.empty()) return e->stopping_;
            return e->running_ - e->waiting_ < e->n_threads_;
          },
          this));
      if (tasks_.empty()) return;  // stopping and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
      ++running_;
    }
    task();
    absl::MutexLock lock(&mu_);
    --running_;
  }
}

BlockingWait::BlockingWait() : executor_(current_executor) {
  if (executor_ != nullptr && wait_depth++ == 0) executor_->BeginWait();
}

BlockingWait::~BlockingWait() {
  if (executor_ != nullptr && --wait_depth == 0) executor_->EndWait();
}

}  // namespace kvs
