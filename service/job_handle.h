// JobHandle: the cancellation flag of one engine job, shared by whoever may
// cancel it (the call's reactor), the engine (which checks it once per
// step, and for a call still queued for KV memory, when woken) and the
// session registry (a call that finds a session busy with a cancelled job
// waits for it to end instead of failing).
//
// Cancel also wakes the engine's loop (SetWaker), so a call cancelled while
// it waits in the engine's queue is answered at once rather than at its
// deadline.
//
// Thread-safe: cancelled() is lock-free; Cancel and SetWaker take a leaf
// mutex.
#ifndef KVSESSION_SERVICE_JOB_HANDLE_H_
#define KVSESSION_SERVICE_JOB_HANDLE_H_

#include <atomic>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "service/wake_signal.h"

namespace kvs {

class JobHandle {
 public:
  void Cancel() {
    cancelled_.store(true, std::memory_order_relaxed);
    std::shared_ptr<WakeSignal> waker;
    {
      absl::MutexLock lock(&mu_);
      waker = waker_;
    }
    if (waker) waker->Wake();
  }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

  // The signal Cancel wakes (the engine's, set as the job is submitted).
  void SetWaker(std::shared_ptr<WakeSignal> waker) {
    absl::MutexLock lock(&mu_);
    waker_ = std::move(waker);
  }

 private:
  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;
  std::shared_ptr<WakeSignal> waker_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_JOB_HANDLE_H_
