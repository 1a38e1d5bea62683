// WakeSignal: a sticky "something changed, look again" flag that one thread
// waits on and any thread sets.
//
// The engine's step loop sleeps on one while it has no job to run: new
// work (Submit), a cancel of a queued call (JobHandle), room given back in
// the page pool (PagePool's callback) and Stop all Wake it. The waiter
// clears the flag as it wakes and then looks at the state, so a Wake that
// comes after the look is never lost: the next wait returns at once.
//
// Thread safety: every method from any thread. Its mutex is a leaf: Wake
// takes nothing else and calls nothing, so it may be called with any other
// lock held (the page pool calls it under its own).
#ifndef KVSESSION_SERVICE_WAKE_SIGNAL_H_
#define KVSESSION_SERVICE_WAKE_SIGNAL_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kvs {

class WakeSignal {
 public:
  // Sets the flag; a thread in WaitAndClear returns.
  void Wake() {
    absl::MutexLock lock(&mu_);
    woken_ = true;
  }

  // Waits until the flag is set or `deadline` passes, then clears it. True
  // when it was set (at once if it already was).
  bool WaitAndClear(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    const bool woken = mu_.AwaitWithDeadline(absl::Condition(&woken_), deadline);
    woken_ = false;
    return woken;
  }

 private:
  absl::Mutex mu_;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_WAKE_SIGNAL_H_
