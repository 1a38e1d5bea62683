// JobHandle: the cancellation flag of one engine job, shared by whoever may
// cancel it (the call's reactor), the engine (which checks it once per
// step) and the session registry (a call that finds a session busy with a
// cancelled job waits for it to end instead of failing).
//
// Thread-safe; lock-free.
#ifndef KVSESSION_SERVICE_JOB_HANDLE_H_
#define KVSESSION_SERVICE_JOB_HANDLE_H_

#include <atomic>

namespace kvs {

class JobHandle {
 public:
  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> cancelled_{false};
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_JOB_HANDLE_H_
