#include "service/generate_reactor.h"

#include "service/kvsession_service.h"
#include "service/proto_convert.h"

namespace kvs {
namespace v1 = kvsession::v1;

class GenerateReactor::Listener : public JobListener {
 public:
  explicit Listener(GenerateReactor* reactor) : reactor_(reactor) { reactor_->Ref(); }
  ~Listener() override { reactor_->Unref(); }
  void OnToken(const GeneratedToken& token, const std::string& text) override {
    reactor_->AddToken(token, text);
  }
  void OnDone(const absl::Status& status, FinishReason reason, const JobUsage& usage,
              const std::string& final_text) override {
    reactor_->Complete(status, reason, usage, final_text);
  }

 private:
  GenerateReactor* const reactor_;
};

GenerateReactor::GenerateReactor(const Tokenizer* tokenizer) : tokenizer_(tokenizer) {}

std::shared_ptr<JobListener> GenerateReactor::listener() { return std::make_shared<Listener>(this); }

void GenerateReactor::SetJob(std::shared_ptr<JobHandle> handle) {
  absl::MutexLock lock(&mu_);
  job_ = std::move(handle);
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
  absl::MutexLock lock(&mu_);
  pending_.add_token_ids(token.id);
  pending_.mutable_text()->append(text);
  if (!token.top.empty()) {
    v1::TokenLogprobs* lp = pending_.add_logprobs();
    v1::TokenLogprob* sampled = lp->mutable_sampled();
    sampled->set_token_id(token.id);
    sampled->set_logprob(token.logprob);
    sampled->set_piece(tokenizer_->Piece(token.id));
    for (const auto& [id, logprob] : token.top) {
      v1::TokenLogprob* alt = lp->add_top();
      alt->set_token_id(id);
      alt->set_logprob(logprob);
      alt->set_piece(tokenizer_->Piece(id));
    }
  }
  MaybeWrite();
}

void GenerateReactor::Complete(const absl::Status& status, FinishReason reason,
                               const JobUsage& usage, const std::string& final_text) {
  absl::MutexLock lock(&mu_);
  pending_.mutable_text()->append(final_text);
  pending_.set_finish_reason(ToProto(reason));
  ToProto(usage, pending_.mutable_usage());
  if (!status.ok() && reason != FinishReason::kCancelled) {
    pending_.set_error_message(std::string(status.message()));
  }
  status_ = ToGrpc(status);
  complete_ = true;
  MaybeWrite();
}

// Called with mu_ held. gRPC operations are started after the lock is
// released (a reaction may run on this thread).
void GenerateReactor::MaybeWrite() {
  enum class Action { kNone, kWrite, kWriteAndFinish, kFinish } action = Action::kNone;
  grpc::Status finish_status;
  if (finished_ || writing_) return;
  if (client_gone_ || cancelled_) {
    if (complete_) {
      finished_ = true;
      action = Action::kFinish;
      finish_status = status_.ok() ? grpc::Status(grpc::StatusCode::CANCELLED, "cancelled") : status_;
    }
  } else if (complete_) {
    in_flight_ = std::move(pending_);
    pending_.Clear();
    writing_ = true;
    final_sent_ = true;
    if (status_.ok()) {
      finished_ = true;
      action = Action::kWriteAndFinish;
    } else {
      action = Action::kWrite;  // Finish(status_) follows in OnWriteDone
    }
  } else if (pending_.token_ids_size() > 0 || !pending_.text().empty()) {
    in_flight_ = std::move(pending_);
    pending_.Clear();
    writing_ = true;
    action = Action::kWrite;
  }
  if (action == Action::kNone) return;
  mu_.Unlock();
  switch (action) {
    case Action::kWrite: StartWrite(&in_flight_); break;
    case Action::kWriteAndFinish: StartWriteAndFinish(&in_flight_, grpc::WriteOptions(), grpc::Status::OK); break;
    case Action::kFinish: Finish(finish_status); break;
    case Action::kNone: break;
  }
  mu_.Lock();
}

void GenerateReactor::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  writing_ = false;
  if (!ok) {
    client_gone_ = true;
    if (job_) job_->Cancel();
  }
  if (final_sent_ && !finished_) {
    finished_ = true;
    grpc::Status st = client_gone_ ? grpc::Status(grpc::StatusCode::CANCELLED, "cancelled") : status_;
    mu_.Unlock();
    Finish(st);
    mu_.Lock();
    return;
  }
  MaybeWrite();
}

void GenerateReactor::OnCancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  if (job_) job_->Cancel();
}

void GenerateReactor::Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }

void GenerateReactor::Unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

void GenerateReactor::OnDone() { Unref(); }

}  // namespace kvs
