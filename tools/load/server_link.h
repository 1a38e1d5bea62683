// ServerLink: where the load tool's clients find the server, and the kill
// windows between its runs.
//
// The controller marks the server down before it kills it, waits until no
// client operation is in flight, restarts it and marks it up at its new
// address; every MarkUp starts a new epoch. A client operation runs between
// BeginOperation (which waits while the server is down) and EndOperation. A
// call failed in a kill window iff the server went down after the epoch its
// operation started in.
//
// Thread-safe.
#ifndef KVSESSION_TOOLS_LOAD_SERVER_LINK_H_
#define KVSESSION_TOOLS_LOAD_SERVER_LINK_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kvs::load {

class ServerLink {
 public:
  struct Lease {
    uint64_t epoch;
    std::string address;
  };

  // Waits until the server is up; nullopt once `stop` is set.
  std::optional<Lease> BeginOperation(const std::atomic<bool>& stop);
  void EndOperation();
  // True if the server went down (was killed) since `epoch` began.
  bool KillWindow(uint64_t epoch) const;

  void MarkDown();
  // Waits until no operation is in flight; false on timeout.
  bool WaitQuiet(absl::Duration timeout);
  void MarkUp(const std::string& address);

 private:
  mutable absl::Mutex mu_;
  bool up_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::string address_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kvs::load

#endif  // KVSESSION_TOOLS_LOAD_SERVER_LINK_H_
