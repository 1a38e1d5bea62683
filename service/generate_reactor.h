// GenerateReactor: one Generate stream on the callback API.
//
// Tokens from the engine are coalesced into GenerateResponse messages: at
// most one write is in flight; whatever arrives meanwhile goes out in the
// next message. The last message carries the finish reason and usage and is
// sent only after the session was persisted (JobListener::OnDone).
// A client cancellation or deadline cancels the job, which stops within one
// engine step; the tokens generated so far stay in the session.
//
// A client that does not read: gRPC's flow control holds the write in
// flight, and tokens wait here. Once the bytes not yet taken by the client
// (the write in flight and what waits, counted as their encoded sizes)
// pass `max_unsent_bytes`, or all streams' together pass the server's
// limit (`unsent`, unsent_bytes.h) while this one is backed up (a write in
// flight and more than kBackedUpBytes waiting behind it), the job is
// cancelled as if by the client; the
// tokens of its last step still join the stream, so the stream holds every
// token the session gained. The call then ends RESOURCE_EXHAUSTED ("the
// client did not read the stream"), after the final message (finish reason
// CANCELLED, usage, error_message), when the client reads them; until it
// reads or leaves, the stream holds about max_unsent_bytes plus one step's
// tokens, and keeps the job's claim on its tenant's generates quota
// (tenant_usage.h); a stream that did not overflow gives the claim back
// when its job ends.
//
// Lifetime: gRPC deletes the reactor in OnDone, which may run on another
// thread as soon as Finish (or StartWriteAndFinish) is called; so Finish is
// called once, after the job's last callback (or instead of submitting a
// job when the request fails early), and nothing touches the reactor after
// it: every state change happens under the mutex first, and the gRPC
// operation it decided on is the caller's last act. The job handle is
// attached (SetJob) before the job is submitted, so a finished job can
// never meet a deleted reactor.
#ifndef KVSESSION_SERVICE_GENERATE_REACTOR_H_
#define KVSESSION_SERVICE_GENERATE_REACTOR_H_

#include <cstdint>
#include <memory>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "kvsession/v1/kvsession.pb.h"
#include "service/engine.h"
#include "service/tenant_usage.h"
#include "service/unsent_bytes.h"

namespace kvs {

class GenerateReactor : public grpc::ServerWriteReactor<kvsession::v1::GenerateResponse> {
 public:
  // `max_unsent_bytes` >= 1 (kvsessiond --max-unsent-stream-kb); `unsent`
  // counts every stream's (borrowed).
  // What a stream must hold waiting behind its write in flight to be
  // stopped by the server's limit: more than a client that reads has.
  static constexpr int64_t kBackedUpBytes = int64_t{64} << 10;

  GenerateReactor(int64_t max_unsent_bytes, UnsentBytes* unsent)
      : max_unsent_bytes_(max_unsent_bytes), unsent_(unsent) {}

  // The listener to give the engine (forwards to this reactor).
  std::shared_ptr<JobListener> listener();
  // Records the job's handle, so a client cancellation reaches it, and its
  // tenant claim (null without quotas). Call before submitting the job.
  void SetJob(std::shared_ptr<JobHandle> handle, std::shared_ptr<TenantClaim> claim);
  // Ends the call without a job (the request failed before generating).
  void FailEarly(const absl::Status& status);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  class Listener;

  void AddToken(const GeneratedToken& token, const std::string& text);
  void Complete(const absl::Status& status, FinishReason reason, const JobUsage& usage,
                const std::string& final_text);
  // The gRPC operation decided under the mutex, performed after it.
  struct Action {
    enum Kind { kNone, kWrite, kWriteAndFinish, kFinish } kind = kNone;
    grpc::Status status;
  };
  Action NextAction() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What follows once a StartWrite has returned (starting_write_ cleared):
  // the Finish an OnWriteDone left to this thread, or NextAction.
  Action AfterWriteStarted() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts `action` on `reactor`; the reactor may be deleted when it
  // returns. Static on purpose: once the mutex is released, only the thread
  // that decided an action other than kNone keeps the reactor alive (no
  // other thread can finish the call while a write or finish it started is
  // pending); for kNone another thread may already have finished and
  // deleted it, so kNone must not touch `reactor`, not even for a member
  // call (UBSan's vptr check reported exactly that under load).
  // After a kWrite's StartWrite returns (once the stream is bound, gRPC
  // has serialized in_flight_ by then; a write started earlier is
  // serialized as the stream binds), it takes the mutex again and performs
  // what AfterWriteStarted says: until then no other thread refills
  // in_flight_ or finishes the call (starting_write_), so the reactor lives
  // and in_flight_ is never changed while gRPC reads it, in an order
  // ThreadSanitizer sees (gRPC's own hand-off from the write to its
  // OnWriteDone is invisible to it).
  static void Perform(GenerateReactor* reactor, Action action);

  const int64_t max_unsent_bytes_;
  UnsentBytes* const unsent_;
  absl::Mutex mu_;
  std::shared_ptr<JobHandle> job_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<TenantClaim> claim_ ABSL_GUARDED_BY(mu_);  // held past the job if overflowed_
  // Encoded bytes of in_flight_ and pending_ (in_flight_ until its
  // OnWriteDone); past max_unsent_bytes_ the job is cancelled (overflowed_).
  int64_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_flight_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool overflowed_ ABSL_GUARDED_BY(mu_) = false;
  bool server_full_ ABSL_GUARDED_BY(mu_) = false;  // overflowed by the server's limit
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  kvsession::v1::GenerateResponse pending_ ABSL_GUARDED_BY(mu_);
  kvsession::v1::GenerateResponse in_flight_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;         // a write is in flight (until OnWriteDone)
  bool starting_write_ ABSL_GUARDED_BY(mu_) = false;  // its StartWrite has not returned yet
  bool complete_ ABSL_GUARDED_BY(mu_) = false;   // the job is done; pending_ is final
  bool final_sent_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;   // Finish was called
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_GENERATE_REACTOR_H_
