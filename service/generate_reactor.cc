#include "service/generate_reactor.h"

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "service/grpc_status.h"
#include "service/proto_convert.h"
#include "service/token_latency_metrics.h"

namespace kvs {
namespace v1 = kvsession::v1;

class GenerateReactor::Listener : public JobListener {
 public:
  explicit Listener(GenerateReactor* reactor) : reactor_(reactor) {}
  void OnToken(const GeneratedToken& token, const std::string& text) override {
    ObserveLatency();
    reactor_->AddToken(token, text);
  }
  void OnDone(const absl::Status& status, FinishReason reason, const JobUsage& usage,
              const std::string& final_text, const SessionInfo&) override {
    reactor_->Complete(status, reason, usage, final_text);
  }

 private:
  // Time to first token / per token (service/token_latency_metrics.h).
  // OnToken runs on the engine thread, one call at a time.
  void ObserveLatency() {
    const TokenLatencyMetrics* m = GetTokenLatencyMetrics();
    if (m == nullptr) return;
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - last_).count();
    (first_ ? m->time_to_first_token : m->time_per_token)->Observe(seconds);
    first_ = false;
    last_ = now;
  }

  GenerateReactor* const reactor_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  bool first_ = true;
};

std::shared_ptr<JobListener> GenerateReactor::listener() { return std::make_shared<Listener>(this); }

void GenerateReactor::SetJob(std::shared_ptr<JobHandle> handle, std::shared_ptr<TenantClaim> claim) {
  absl::MutexLock lock(&mu_);
  job_ = std::move(handle);
  claim_ = std::move(claim);
  if (cancelled_ || client_gone_) job_->Cancel();
}

void GenerateReactor::FailEarly(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
  }
  Finish(ToGrpc(status));
}

void GenerateReactor::AddToken(const GeneratedToken& token, const std::string& text) {
  Action action;
  {
    absl::MutexLock lock(&mu_);
    pending_.add_token_ids(token.id);
    pending_.mutable_text()->append(text);
    // The encoded growth, within a few bytes (the id's varint, the text's
    // bytes and, below, the log-probabilities' entry with its tag).
    int64_t added = 6 + static_cast<int64_t>(text.size());
    if (!token.top.empty()) {
      v1::TokenLogprobs* lp = pending_.add_logprobs();
      v1::TokenLogprob* sampled = lp->mutable_sampled();
      sampled->set_token_id(token.id);
      sampled->set_logprob(token.logprob);
      sampled->set_piece(token.piece);
      for (const TokenLogprob& t : token.top) {
        v1::TokenLogprob* alt = lp->add_top();
        alt->set_token_id(t.id);
        alt->set_logprob(t.logprob);
        alt->set_piece(t.piece);
      }
      added += 6 + static_cast<int64_t>(lp->ByteSizeLong());
    }
    pending_bytes_ += added;
    // At the server's limit only a stream that is itself backed up stops
    // (its write waits and more than kBackedUpBytes wait behind it): a
    // client that reads keeps its stream going.
    const bool server_full = unsent_->Add(added) && writing_ && pending_bytes_ > kBackedUpBytes;
    if (!overflowed_ && (server_full || pending_bytes_ + in_flight_bytes_ > max_unsent_bytes_)) {
      overflowed_ = true;
      server_full_ = server_full;
      if (job_) job_->Cancel();
    }
    action = NextAction();
  }
  Perform(this, action);
}

void GenerateReactor::Complete(const absl::Status& status, FinishReason reason,
                               const JobUsage& usage, const std::string& final_text) {
  Action action;
  {
    absl::MutexLock lock(&mu_);
    pending_.mutable_text()->append(final_text);
    pending_.set_finish_reason(ToProto(reason));
    ToProto(usage, pending_.mutable_usage());
    if (overflowed_ && reason == FinishReason::kCancelled && !cancelled_ && !client_gone_) {
      const absl::Status unread = absl::ResourceExhaustedError(
          server_full_ ? absl::StrCat("the client did not read the stream, and the streams whose clients do not "
                                      "read hold the server's limit of ",
                                      unsent_->limit() >> 20, " MiB (kvsessiond --max-unsent-mb), so "
                                      "generation stopped")
                       : absl::StrCat("the client did not read the stream: more than ", max_unsent_bytes_ >> 10,
                                      " KiB waited to be sent (kvsessiond --max-unsent-stream-kb), so "
                                      "generation stopped"));
      pending_.set_error_message(std::string(unread.message()));
      status_ = ToGrpc(unread);
    } else {
      if (!status.ok() && reason != FinishReason::kCancelled) {
        pending_.set_error_message(std::string(status.message()));
      }
      status_ = ToGrpc(status);
    }
    // A stream that kept up gives its tenant's generates slot back with
    // the job, before its last message goes out.
    if (!overflowed_) claim_.reset();
    complete_ = true;
    action = NextAction();
  }
  Perform(this, action);
}

GenerateReactor::Action GenerateReactor::NextAction() {
  if (finished_ || writing_ || starting_write_) return {};
  if (client_gone_ || cancelled_) {
    if (!complete_) return {};
    finished_ = true;
    return {Action::kFinish,
            status_.ok() ? grpc::Status(grpc::StatusCode::CANCELLED, "cancelled") : status_};
  }
  if (complete_) {
    in_flight_ = std::move(pending_);
    pending_.Clear();
    in_flight_bytes_ = pending_bytes_;
    pending_bytes_ = 0;
    writing_ = true;
    final_sent_ = true;
    if (!status_.ok()) {
      starting_write_ = true;
      return {Action::kWrite, {}};  // Finish(status_) follows its OnWriteDone
    }
    finished_ = true;
    return {Action::kWriteAndFinish, grpc::Status::OK};
  }
  if (pending_.token_ids_size() > 0 || !pending_.text().empty()) {
    in_flight_ = std::move(pending_);
    pending_.Clear();
    in_flight_bytes_ = pending_bytes_;
    pending_bytes_ = 0;
    writing_ = true;
    starting_write_ = true;
    return {Action::kWrite, {}};
  }
  return {};
}

GenerateReactor::Action GenerateReactor::AfterWriteStarted() {
  starting_write_ = false;
  if (final_sent_ && !writing_ && !finished_) {  // its OnWriteDone came first
    finished_ = true;
    return {Action::kFinish, client_gone_ ? grpc::Status(grpc::StatusCode::CANCELLED, "cancelled") : status_};
  }
  return NextAction();
}

void GenerateReactor::Perform(GenerateReactor* reactor, Action action) {
  for (;;) {
    switch (action.kind) {
      case Action::kWrite: reactor->StartWrite(&reactor->in_flight_); break;
      case Action::kWriteAndFinish:
        reactor->StartWriteAndFinish(&reactor->in_flight_, grpc::WriteOptions(), action.status);
        return;
      case Action::kFinish: reactor->Finish(action.status); return;
      case Action::kNone: return;
    }
    {
      absl::MutexLock lock(&reactor->mu_);
      action = reactor->AfterWriteStarted();
    }
  }
}

void GenerateReactor::OnWriteDone(bool ok) {
  Action action;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    unsent_->Remove(in_flight_bytes_);
    in_flight_bytes_ = 0;
    if (!ok) {
      client_gone_ = true;
      if (job_) job_->Cancel();
    }
    if (starting_write_) {
      // The thread whose StartWrite has not returned yet goes on from here
      // (Perform): in_flight_ stays as it is until then.
      action = {};
    } else if (final_sent_ && !finished_) {
      finished_ = true;
      action = {Action::kFinish,
                client_gone_ ? grpc::Status(grpc::StatusCode::CANCELLED, "cancelled") : status_};
    } else {
      action = NextAction();
    }
  }
  Perform(this, action);
}

void GenerateReactor::OnCancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  if (job_) job_->Cancel();
}

void GenerateReactor::OnDone() {
  {
    absl::MutexLock lock(&mu_);
    unsent_->Remove(pending_bytes_ + in_flight_bytes_);
  }
  delete this;
}

}  // namespace kvs
