// CancellableReactor: a unary-call reactor that cancels the engine job it
// waits for when the client cancels or its deadline passes (Append and
// CreateSession prefill: the work stops within one engine step; whatever
// was prefilled stays in the session).
//
// Lifetime: gRPC deletes it in OnDone, after Finish; Finish is called once,
// by the handler: directly when no job runs, else through FinishJob from the
// job's last callback. FinishJob defers Finish until SetJob has recorded the
// job (the job may end before SetJob runs, and Finish may delete the reactor).
#ifndef KVSESSION_SERVICE_CANCELLABLE_REACTOR_H_
#define KVSESSION_SERVICE_CANCELLABLE_REACTOR_H_

#include <memory>
#include <optional>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "service/engine.h"

namespace kvs {

class CancellableReactor : public grpc::ServerUnaryReactor {
 public:
  // Records the job, cancelling it at once if the call is already cancelled.
  void SetJob(std::shared_ptr<JobHandle> job) {
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      job_ = std::move(job);
      job_set_ = true;
      if (cancelled_) job_->Cancel();
      finish.swap(deferred_finish_);
    }
    if (finish) Finish(*finish);  // may delete this: nothing after it
  }
  // Finish from the job's callback (see Lifetime above).
  void FinishJob(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (!job_set_) {
        deferred_finish_ = status;
        return;
      }
    }
    Finish(status);
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
  bool job_set_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> deferred_finish_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_CANCELLABLE_REACTOR_H_
