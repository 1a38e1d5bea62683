// CancellableReactor: a unary-call reactor that cancels the engine job it
// waits for when the client cancels or its deadline passes (Append and
// CreateSession prefill: the work stops within one engine step; whatever
// was prefilled stays in the session).
//
// Lifetime: gRPC deletes it in OnDone, after Finish; Finish is called once,
// by the handler, after the job's last callback.
#ifndef KVSESSION_SERVICE_CANCELLABLE_REACTOR_H_
#define KVSESSION_SERVICE_CANCELLABLE_REACTOR_H_

#include <memory>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "service/engine.h"

namespace kvs {

class CancellableReactor : public grpc::ServerUnaryReactor {
 public:
  // Records the job, cancelling it at once if the call is already cancelled.
  void SetJob(std::shared_ptr<JobHandle> job) {
    absl::MutexLock lock(&mu_);
    job_ = std::move(job);
    if (cancelled_) job_->Cancel();
  }
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (job_) job_->Cancel();
  }
  void OnDone() override { delete this; }

 private:
  absl::Mutex mu_;
  std::shared_ptr<JobHandle> job_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_CANCELLABLE_REACTOR_H_
