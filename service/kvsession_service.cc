#include "service/kvsession_service.h"

#include <algorithm>
#include <functional>
#include <random>

#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "service/cancellable_reactor.h"
#include "service/fleet_routing.h"
#include "service/generate_reactor.h"
#include "service/grpc_status.h"
#include "service/proto_convert.h"
#include "service/request_checks.h"
#include "service/tenant_info.h"
#include "model/kv_slide.h"

namespace kvs {
namespace v1 = kvsession::v1;

namespace {

constexpr int kDefaultMaxTokens = 128;
constexpr int kDefaultPageSize = 100;
constexpr int kMaxPageSize = 1000;

// A JobListener for unary calls: only the end matters.
class DoneListener : public JobListener {
 public:
  using Done = std::function<void(const absl::Status&, const JobUsage&, const SessionInfo&)>;
  explicit DoneListener(Done done) : done_(std::move(done)) {}
  void OnToken(const GeneratedToken&, const std::string&) override {}
  void OnDone(const absl::Status& status, FinishReason, const JobUsage& usage, const std::string&,
              const SessionInfo& session) override {
    done_(status, usage, session);
  }

 private:
  Done done_;
};

// How long a call may wait for a session another call is letting go of
// (session_registry.h): its own deadline, at most kMaxBusyWait (the waits
// hold an executor thread).
constexpr absl::Duration kMaxBusyWait = absl::Seconds(30);

absl::Time Deadline(grpc::CallbackServerContext* ctx) {
  return std::min(absl::FromChrono(ctx->deadline()), absl::Now() + kMaxBusyWait);
}

// A request's context policy: UNSPECIFIED is ERROR; values outside the
// enum are INVALID_ARGUMENT.
absl::StatusOr<ContextPolicy> CheckContextPolicy(int value) {
  if (!v1::ContextPolicy_IsValid(value)) {
    return absl::InvalidArgumentError(absl::StrCat("context_policy ", value, " is not a ContextPolicy"));
  }
  return FromProto(static_cast<v1::ContextPolicy>(value));
}

absl::Status ValidatePageSize(int page_size) {
  if (page_size < 0 || page_size > kMaxPageSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size must be in [0, ", kMaxPageSize, "], got ", page_size));
  }
  return absl::OkStatus();
}

InputResolver MakeInputResolver(const Model& model, const ServiceLimits& limits,
                                const std::string& family) {
  const InputLimits input_limits{limits.max_context, limits.max_input_bytes};
  absl::StatusOr<InputResolver> r =
      InputResolver::Create(model.gguf(), model.tokenizer(), family, input_limits);
  // An unknown family was refused at startup; fall back to detection.
  if (!r.ok()) r = InputResolver::Create(model.gguf(), model.tokenizer(), "", input_limits);
  return *std::move(r);
}

bool InputEmpty(const v1::Input& input) {
  switch (input.content_case()) {
    case v1::Input::kTokens:
      return input.tokens().ids_size() == 0;
    case v1::Input::kMessages:
      return input.messages().messages_size() == 0;
    default:
      return input.text().empty();
  }
}

}  // namespace

KvSessionService::KvSessionService(const Model& model, SessionManager* sessions, Engine* engine,
                                   TaskExecutor* io, ServerFacts facts)
    : model_(model),
      sessions_(sessions),
      engine_(engine),
      io_(io),
      facts_(std::move(facts)),
      inputs_(MakeInputResolver(model, sessions->limits(), facts_.chat_template)) {}

SamplingParams KvSessionService::ServerDefaultSampling() const {
  SamplingParams p;
  p.seed = std::random_device{}() | (static_cast<uint64_t>(std::random_device{}()) << 32);
  return p;
}

absl::StatusOr<ResolvedInput> KvSessionService::ResolveInput(
    const v1::Input* input, const Session& session, const GenerationPromptChoice* generate) const {
  return inputs_.Resolve(input, session.tokens, session.chat, generate);
}

absl::Status KvSessionService::ValidateLabels(
    const google::protobuf::Map<std::string, std::string>& labels) const {
  const ServiceLimits& limits = sessions_->limits();
  if (labels.size() > static_cast<size_t>(limits.max_labels)) {
    return absl::InvalidArgumentError(absl::StrCat("at most ", limits.max_labels, " labels, got ",
                                                   labels.size()));
  }
  for (const auto& [k, v] : labels) {
    if (k.empty() || k.size() > static_cast<size_t>(limits.max_label_bytes) ||
        v.size() > static_cast<size_t>(limits.max_label_bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "label keys must be non-empty and keys and values at most ", limits.max_label_bytes, " bytes"));
    }
  }
  return absl::OkStatus();
}

absl::Status KvSessionService::SetContextPolicy(ContextPolicy policy,
                                               const v1::CreateSessionRequest& request,
                                               size_t input_tokens, Session* session) const {
  // Unset keep_tokens: what the session is created with (BOS and input,
  // e.g. a system prompt).
  const int64_t keep = request.has_keep_tokens()
                           ? request.keep_tokens()
                           : static_cast<int64_t>(session->tokens.size() + input_tokens);
  const int max_context = sessions_->limits().max_context;
  if (policy == ContextPolicy::kSlide || request.has_keep_tokens()) {
    absl::StatusOr<SlidePlan> plan =
        PlanSlide(max_context, max_context, static_cast<int>(std::min<int64_t>(keep, max_context)),
                  sessions_->pool()->geometry().page_tokens);
    if (!plan.ok() || keep > max_context) {
      return absl::InvalidArgumentError(absl::StrCat(
          "keep_tokens ", keep, request.has_keep_tokens() ? "" : " (the session's initial tokens)",
          " leaves no whole KV page of the ", max_context,
          "-token context to drop; set a smaller keep_tokens"));
    }
  }
  session->context_policy = policy;
  session->keep_tokens = static_cast<int>(std::min<int64_t>(keep, max_context));
  return absl::OkStatus();
}

void KvSessionService::RunPrefillJob(
    std::shared_ptr<Session> session, ResolvedInput input, int prompt_tokens,
    std::shared_ptr<JobHandle> handle, absl::Time deadline,
    std::function<void(const absl::Status&, const JobUsage&, const SessionInfo&)> done) {
  engine_->Submit(std::move(session), std::move(input.ids), prompt_tokens, std::nullopt,
                  std::make_shared<DoneListener>(std::move(done)), std::move(handle), deadline,
                  std::move(input.chat));
}

bool KvSessionService::DeleteSessionsOfEndedCall(grpc::CallbackServerContext* ctx,
                                                 const std::vector<std::string>& ids,
                                                 grpc::ServerUnaryReactor* reactor) const {
  if (!ctx->IsCancelled()) return false;
  for (const std::string& id : ids) sessions_->Delete(id).IgnoreError();
  reactor->Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                               "the call ended before its reply; the sessions it made were deleted"));
  return true;
}

grpc::ServerUnaryReactor* KvSessionService::CreateSession(grpc::CallbackServerContext* ctx,
                                                          const v1::CreateSessionRequest* request,
                                                          v1::Session* response) {
  auto* reactor = new CancellableReactor();
  absl::StatusOr<Principal> caller = CallerOf(ctx);
  if (!caller.ok()) {
    reactor->Finish(ToGrpc(caller.status()));
    return reactor;
  }
  if (absl::Status s = ValidateLabels(request->labels()); !s.ok()) {
    reactor->Finish(ToGrpc(s));
    return reactor;
  }
  SamplingParams sampling = MergeSampling(ServerDefaultSampling(), request->sampling());
  if (absl::Status s = sampling.ValidateFor(model_.config().vocab_size); !s.ok()) {
    reactor->Finish(ToGrpc(s));
    return reactor;
  }
  // The key the proxy routed this call on goes into the id (docs/fleet.md).
  absl::StatusOr<std::string> route_key = RouteKeyOfCall(*ctx);
  if (!route_key.ok()) {
    reactor->Finish(ToGrpc(route_key.status()));
    return reactor;
  }
  absl::StatusOr<ContextPolicy> policy = CheckContextPolicy(request->context_policy());
  if (policy.ok() && request->has_keep_tokens() && request->keep_tokens() < 0) {
    policy = absl::InvalidArgumentError(absl::StrCat("keep_tokens must be >= 0, got ", request->keep_tokens()));
  }
  if (!policy.ok()) {
    reactor->Finish(ToGrpc(policy.status()));
    return reactor;
  }
  io_->Submit([this, ctx, reactor, request, response, sampling, policy = *policy, deadline = Deadline(ctx),
               owner = caller->tenant, route_key = *std::move(route_key)] {
    absl::StatusOr<std::shared_ptr<Session>> session =
        sessions_->CreateAcquired(sampling, Labels(request->labels()), owner, route_key);
    if (!session.ok()) return reactor->Finish(ToGrpc(session.status()));
    std::shared_ptr<Session> s = *session;
    ResolvedInput input;
    if (request->has_input()) {
      absl::StatusOr<ResolvedInput> ids = ResolveInput(&request->input(), *s);
      absl::Status st = ids.ok() ? SetContextPolicy(policy, *request, ids->ids.size(), s.get())
                                 : ids.status();
      if (st.ok()) st = engine_->Validate(*s, ids->ids, std::nullopt);
      if (!st.ok()) {
        sessions_->Discard(s);
        return reactor->Finish(ToGrpc(st));
      }
      input = *std::move(ids);
    } else if (absl::Status st = SetContextPolicy(policy, *request, 0, s.get()); !st.ok()) {
      sessions_->Discard(s);
      return reactor->Finish(ToGrpc(st));
    }
    absl::StatusOr<std::shared_ptr<TenantClaim>> quota =
        AdmitJob(*s, static_cast<int64_t>(input.ids.size()), request->has_input());
    if (!quota.ok()) {
      sessions_->Discard(s);
      return reactor->Finish(ToGrpc(quota.status()));
    }
    const int prompt = static_cast<int>(s->tokens.size() + input.ids.size());
    auto handle = std::make_shared<JobHandle>();
    reactor->SetJob(handle);
    sessions_->SetJob(*s, handle);
    RunPrefillJob(s, std::move(input), prompt, std::move(handle), deadline,
                  [this, ctx, s, reactor, response, quota = *std::move(quota)](
                      const absl::Status& st, const JobUsage&, const SessionInfo& info) mutable {
                    quota.reset();  // the job has ended
                    if (!st.ok()) {
                      // The session was listed while its job ran (and may be
                      // stored): deleted like any other, which also forgets
                      // one never stored. If another call holds it now
                      // (ABORTED), or the store refuses, it stays, as on
                      // disk: forgetting it under that call would pull its
                      // KV away, and a stored record would come back.
                      sessions_->Delete(s->id).IgnoreError();
                      return reactor->Finish(ToGrpc(st));
                    }
                    if (DeleteSessionsOfEndedCall(ctx, {s->id}, reactor)) return;
                    ToProto(info, response);
                    reactor->Finish(grpc::Status::OK);
                  });
  });
  return reactor;
}

grpc::ServerUnaryReactor* KvSessionService::Append(grpc::CallbackServerContext* ctx,
                                                   const v1::AppendRequest* request,
                                                   v1::AppendResponse* response) {
  auto* reactor = new CancellableReactor();
  const bool empty = !request->has_input() || InputEmpty(request->input());
  if (absl::Status st = CheckSessionId("session_id", request->session_id()); !st.ok()) {
    reactor->Finish(ToGrpc(st));
    return reactor;
  }
  if (empty) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "input is empty"));
    return reactor;
  }
  io_->Submit([this, reactor, request, response, deadline = Deadline(ctx)] {
    absl::StatusOr<std::shared_ptr<Session>> session =
        sessions_->Acquire(request->session_id(), "Append", deadline);
    if (!session.ok()) return reactor->Finish(ToGrpc(session.status()));
    std::shared_ptr<Session> s = *session;
    absl::StatusOr<ResolvedInput> ids = ResolveInput(&request->input(), *s);
    absl::Status st = CheckExpectedLength(request->has_expected_length(), request->expected_length(),
                                          static_cast<int64_t>(s->tokens.size()));
    if (st.ok()) st = ids.ok() ? engine_->Validate(*s, ids->ids, std::nullopt) : ids.status();
    absl::StatusOr<std::shared_ptr<TenantClaim>> quota;
    if (st.ok()) quota = AdmitJob(*s, static_cast<int64_t>(ids->ids.size()), true);
    if (st.ok()) st = quota.status();
    if (!st.ok()) {
      sessions_->Release(s);
      return reactor->Finish(ToGrpc(st));
    }
    const int prompt = static_cast<int>(ids->ids.size());
    auto handle = std::make_shared<JobHandle>();
    reactor->SetJob(handle);
    sessions_->SetJob(*s, handle);
    RunPrefillJob(s, *std::move(ids), prompt, std::move(handle), deadline,
                  [reactor, response, quota = *std::move(quota)](const absl::Status& st, const JobUsage& usage,
                                                      const SessionInfo& info) mutable {
                    quota.reset();  // the job has ended
                    if (!st.ok()) return reactor->Finish(ToGrpc(st));
                    ToProto(usage, response->mutable_usage());
                    ToProto(info, response->mutable_session());
                    reactor->Finish(grpc::Status::OK);
                  });
  });
  return reactor;
}

grpc::ServerWriteReactor<v1::GenerateResponse>* KvSessionService::Generate(
    grpc::CallbackServerContext* ctx, const v1::GenerateRequest* request) {
  auto* reactor = new GenerateReactor(max_unsent_stream_bytes_, unsent_.get());
  if (absl::Status st = CheckSessionId("session_id", request->session_id()); !st.ok()) {
    reactor->FailEarly(st);
    return reactor;
  }
  io_->Submit([this, reactor, request, deadline = Deadline(ctx)] {
    absl::StatusOr<std::shared_ptr<Session>> session =
        sessions_->Acquire(request->session_id(), "Generate", deadline);
    if (!session.ok()) return reactor->FailEarly(session.status());
    std::shared_ptr<Session> s = *session;
    ResolvedInput input;
    absl::Status st = CheckExpectedLength(request->has_expected_length(), request->expected_length(),
                                          static_cast<int64_t>(s->tokens.size()));
    GenerationPromptChoice prompt_choice;
    if (request->has_add_generation_prompt()) prompt_choice.add = request->add_generation_prompt();
    prompt_choice.enable_thinking = !request->has_enable_thinking() || request->enable_thinking();
    absl::StatusOr<ResolvedInput> ids =
        ResolveInput(request->has_input() ? &request->input() : nullptr, *s, &prompt_choice);
    if (ids.ok()) {
      input = *std::move(ids);
    } else if (st.ok()) {
      st = ids.status();
    }
    GenerateOptions gen;
    gen.max_tokens = request->has_max_tokens() ? request->max_tokens() : kDefaultMaxTokens;
    gen.sampling = MergeSampling(s->sampling, request->sampling());
    gen.reseed = request->sampling().has_seed();
    gen.stop.assign(request->stop().begin(), request->stop().end());
    gen.top_logprobs = request->top_logprobs();
    gen.ignore_eos = request->ignore_eos();
    if (request->has_context_policy()) {
      absl::StatusOr<ContextPolicy> policy = CheckContextPolicy(request->context_policy());
      if (policy.ok()) {
        gen.context_policy = *policy;
      } else if (st.ok()) {
        st = policy.status();
      }
    }
    if (st.ok()) st = engine_->Validate(*s, input.ids, gen);
    absl::StatusOr<std::shared_ptr<TenantClaim>> quota;
    if (st.ok()) quota = AdmitJob(*s, static_cast<int64_t>(input.ids.size()) + gen.max_tokens, true);
    if (st.ok()) st = quota.status();
    if (!st.ok()) {
      sessions_->Release(s);
      return reactor->FailEarly(st);
    }
    const int prompt = static_cast<int>(input.ids.size());
    auto handle = std::make_shared<JobHandle>();
    reactor->SetJob(handle, *quota);
    sessions_->SetJob(*s, handle);
    engine_->Submit(s, std::move(input.ids), prompt, std::move(gen),
                    ReleaseWhenDone(reactor->listener(), *std::move(quota)),
                    std::move(handle), deadline, std::move(input.chat));
  });
  return reactor;
}

grpc::ServerUnaryReactor* KvSessionService::Fork(grpc::CallbackServerContext* ctx,
                                                 const v1::ForkRequest* request,
                                                 v1::ForkResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const int limit = sessions_->limits().max_fork_count;
  absl::Status st = CheckSessionId("session_id", request->session_id());
  if (!st.ok()) {
  } else if (request->count() < 1 || request->count() > limit) {
    st = absl::InvalidArgumentError(absl::StrCat("count must be in [1, ", limit, "], got ", request->count()));
  } else if (request->seeds_size() > request->count()) {
    st = absl::InvalidArgumentError(absl::StrCat("got ", request->seeds_size(), " seeds for ",
                                                 request->count(), " branches"));
  } else {
    st = ValidateLabels(request->labels());
  }
  if (!st.ok()) {
    reactor->Finish(ToGrpc(st));
    return reactor;
  }
  io_->Submit([this, ctx, reactor, request, response, deadline = Deadline(ctx)] {
    // Reserved once the source is held (its record then stays as it is
    // until the branches are written); held until they are written or
    // refused.
    std::shared_ptr<TenantClaim> store_claim;
    std::function<absl::Status()> reserve;
    if (tenant_usage_ != nullptr) {
      reserve = [&] {
        absl::StatusOr<std::shared_ptr<TenantClaim>> claim =
            tenant_usage_->ReserveFork(request->session_id(), request->count(), request->has_at_length(),
                                       Labels(request->labels()));
        if (!claim.ok()) return claim.status();
        store_claim = *std::move(claim);
        return absl::OkStatus();
      };
    }
    absl::StatusOr<std::vector<std::shared_ptr<Session>>> branches = sessions_->Fork(
        request->session_id(), request->count(),
        std::vector<uint64_t>(request->seeds().begin(), request->seeds().end()),
        Labels(request->labels()), deadline,
        request->has_at_length() ? std::optional<int>(request->at_length()) : std::nullopt, reserve);
    store_claim.reset();  // the store's own count holds what was written
    if (!branches.ok()) return reactor->Finish(ToGrpc(branches.status()));
    std::vector<std::string> ids;
    for (const auto& b : *branches) ids.push_back(b->id);
    if (DeleteSessionsOfEndedCall(ctx, ids, reactor)) return;
    for (const auto& b : *branches) {
      absl::StatusOr<SessionInfo> info = sessions_->Get(b->id, false);
      if (info.ok()) ToProto(*info, response->add_sessions());
    }
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* KvSessionService::Snapshot(grpc::CallbackServerContext* ctx,
                                                     const v1::SnapshotRequest* request,
                                                     v1::Checkpoint* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (absl::Status st = CheckSessionId("session_id", request->session_id()); !st.ok()) {
    reactor->Finish(ToGrpc(st));
    return reactor;
  }
  if (request->name().size() > static_cast<size_t>(sessions_->limits().max_label_bytes)) {
    reactor->Finish(ToGrpc(absl::InvalidArgumentError(absl::StrCat(
        "name must be at most ", sessions_->limits().max_label_bytes, " bytes, got ", request->name().size()))));
    return reactor;
  }
  io_->Submit([this, reactor, request, response, deadline = Deadline(ctx)] {
    // Reserved once the session is held, as Fork's; held until the records
    // are written or refused.
    std::shared_ptr<TenantClaim> store_claim;
    std::function<absl::Status()> reserve;
    if (tenant_usage_ != nullptr) {
      reserve = [&] {
        absl::StatusOr<std::shared_ptr<TenantClaim>> claim = tenant_usage_->ReserveSnapshot(request->session_id());
        if (!claim.ok()) return claim.status();
        store_claim = *std::move(claim);
        return absl::OkStatus();
      };
    }
    int64_t bytes = 0;
    absl::StatusOr<CheckpointRecord> c =
        sessions_->Snapshot(request->session_id(), request->name(), &bytes, deadline, reserve);
    store_claim.reset();
    if (c.ok()) {
      ToProto(*c, response);
      response->set_bytes_written(bytes);
    }
    reactor->Finish(ToGrpc(c.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* KvSessionService::Restore(grpc::CallbackServerContext* ctx,
                                                    const v1::RestoreRequest* request,
                                                    v1::Session* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (request->source_case() == v1::RestoreRequest::SOURCE_NOT_SET) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "give checkpoint_id or session_id to restore"));
    return reactor;
  }
  absl::Status valid = request->has_checkpoint_id()
                           ? CheckCheckpointId("checkpoint_id", request->checkpoint_id())
                           : CheckSessionId("session_id", request->session_id());
  if (valid.ok()) valid = ValidateLabels(request->labels());
  if (!valid.ok()) {
    reactor->Finish(ToGrpc(valid));
    return reactor;
  }
  io_->Submit([this, ctx, reactor, request, response, deadline = Deadline(ctx)] {
    std::shared_ptr<TenantClaim> store_claim;  // held until the record is written or refused
    if (tenant_usage_ != nullptr && request->has_checkpoint_id()) {
      absl::StatusOr<std::shared_ptr<TenantClaim>> claim =
          tenant_usage_->ReserveRestore(request->checkpoint_id(), Labels(request->labels()));
      if (!claim.ok()) return reactor->Finish(ToGrpc(claim.status()));
      store_claim = *std::move(claim);
    }
    absl::StatusOr<std::shared_ptr<Session>> s =
        request->has_checkpoint_id()
            ? sessions_->RestoreCheckpoint(request->checkpoint_id(), Labels(request->labels()), deadline)
            : sessions_->RestoreSession(request->session_id(), deadline);
    store_claim.reset();
    if (!s.ok()) return reactor->Finish(ToGrpc(s.status()));
    // A checkpoint's restore makes a session; a session's restore loads one
    // the client named (and keeps it).
    if (request->has_checkpoint_id() && DeleteSessionsOfEndedCall(ctx, {(*s)->id}, reactor)) return;
    absl::StatusOr<SessionInfo> info = sessions_->Get((*s)->id, false);
    if (info.ok()) ToProto(*info, response);
    reactor->Finish(ToGrpc(info.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* KvSessionService::GetSession(grpc::CallbackServerContext* ctx,
                                                       const v1::GetSessionRequest* request,
                                                       v1::Session* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (absl::Status st = CheckSessionId("session_id", request->session_id()); !st.ok()) {
    reactor->Finish(ToGrpc(st));
    return reactor;
  }
  const bool want_tokens = request->include_token_ids() || request->include_text();
  absl::StatusOr<SessionInfo> info = sessions_->Get(request->session_id(), want_tokens);
  if (info.ok()) {
    ToProto(*info, response);
    if (request->include_token_ids()) {
      response->mutable_token_ids()->Add(info->tokens.begin(), info->tokens.end());
    }
    if (request->include_text()) {
      // Invalid UTF-8 (a token cut inside a character) shows as U+FFFD.
      Utf8StreamDecoder decoder;
      std::string text = decoder.Push(model_.tokenizer().Decode(info->tokens));
      text += decoder.Finish();
      response->set_text(text);
    }
  }
  reactor->Finish(ToGrpc(info.status()));
  return reactor;
}

grpc::ServerUnaryReactor* KvSessionService::ListSessions(grpc::CallbackServerContext* ctx,
                                                         const v1::ListSessionsRequest* request,
                                                         v1::ListSessionsResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::StatusOr<Principal> caller = CallerOf(ctx);
  absl::Status valid = caller.status();
  if (valid.ok()) valid = ValidatePageSize(request->page_size());
  if (valid.ok()) valid = CheckSessionPageToken(request->page_token());
  if (!valid.ok()) {
    reactor->Finish(ToGrpc(valid));
    return reactor;
  }
  const int page_size = request->page_size() > 0 ? request->page_size() : kDefaultPageSize;
  // A user sees its own sessions, an admin everyone's.
  std::vector<SessionInfo> page = sessions_->List(request->page_token(), page_size + 1,
                                                  caller->is_admin() ? nullptr : &caller->tenant);
  for (int i = 0; i < static_cast<int>(page.size()) && i < page_size; ++i) {
    ToProto(page[i], response->add_sessions());
  }
  if (static_cast<int>(page.size()) > page_size) response->set_next_page_token(page[page_size - 1].id);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* KvSessionService::DeleteSession(grpc::CallbackServerContext* ctx,
                                                          const v1::DeleteSessionRequest* request,
                                                          v1::DeleteSessionResponse*) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (absl::Status st = CheckSessionId("session_id", request->session_id()); !st.ok()) {
    reactor->Finish(ToGrpc(st));
    return reactor;
  }
  io_->Submit([this, reactor, request, deadline = Deadline(ctx)] {
    reactor->Finish(ToGrpc(sessions_->Delete(request->session_id(), deadline)));
  });
  return reactor;
}

grpc::ServerUnaryReactor* KvSessionService::ListCheckpoints(
    grpc::CallbackServerContext* ctx, const v1::ListCheckpointsRequest* request,
    v1::ListCheckpointsResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::StatusOr<Principal> caller = CallerOf(ctx);
  absl::Status valid = caller.status();
  if (valid.ok()) valid = ValidatePageSize(request->page_size());
  if (valid.ok()) valid = CheckCheckpointPageToken(request->page_token());
  if (valid.ok() && !request->session_id().empty()) valid = CheckSessionId("session_id", request->session_id());
  if (!valid.ok()) {
    reactor->Finish(ToGrpc(valid));
    return reactor;
  }
  const int page_size = request->page_size() > 0 ? request->page_size() : kDefaultPageSize;
  std::vector<CheckpointRecord> page =
      sessions_->ListCheckpoints(request->session_id(), request->page_token(), page_size + 1,
                                 caller->is_admin() ? nullptr : &caller->tenant);
  for (int i = 0; i < static_cast<int>(page.size()) && i < page_size; ++i) {
    ToProto(page[i], response->add_checkpoints());
  }
  if (static_cast<int>(page.size()) > page_size) response->set_next_page_token(page[page_size - 1].id());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* KvSessionService::DeleteCheckpoint(
    grpc::CallbackServerContext* ctx, const v1::DeleteCheckpointRequest* request,
    v1::DeleteCheckpointResponse*) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (absl::Status st = CheckCheckpointId("checkpoint_id", request->checkpoint_id()); !st.ok()) {
    reactor->Finish(ToGrpc(st));
    return reactor;
  }
  io_->Submit([this, reactor, request] {
    reactor->Finish(ToGrpc(sessions_->DeleteCheckpoint(request->checkpoint_id())));
  });
  return reactor;
}

grpc::ServerUnaryReactor* KvSessionService::GetServerInfo(grpc::CallbackServerContext* ctx,
                                                          const v1::GetServerInfoRequest*,
                                                          v1::ServerInfo* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const ModelConfig& c = model_.config();
  response->set_version(facts_.version);
  v1::ModelInfo* m = response->mutable_model();
  m->set_name(c.name);
  m->set_architecture(c.arch_name);
  m->set_path(facts_.model_path);
  m->set_fingerprint(absl::BytesToHexString(sessions_->model_fingerprint()));
  m->set_parameters(model_.parameter_count());
  m->set_weight_type(model_.weight_type_name());
  m->set_vocab_size(c.vocab_size);
  m->set_context_length(c.context_length);
  m->set_n_layers(c.n_layers);
  m->set_n_heads(c.n_heads);
  m->set_n_kv_heads(c.n_kv_heads);
  m->set_head_dim(c.head_dim);
  m->set_bos_token_id(model_.tokenizer().bos_id());
  m->set_eos_token_id(model_.tokenizer().eos_id());
  m->set_chat_template(std::string(inputs_.chat_family()));
  const ServiceLimits& l = sessions_->limits();
  v1::Limits* limits = response->mutable_limits();
  limits->set_max_sessions(l.max_sessions);
  limits->set_max_context(l.max_context);
  limits->set_max_tokens_per_generate(l.max_tokens_per_generate);
  limits->set_max_fork_count(l.max_fork_count);
  limits->set_max_input_bytes(l.max_input_bytes);
  limits->set_max_batch_tokens(facts_.max_batch_tokens);
  if (l.idle_session_ttl > absl::ZeroDuration()) {
    // At most protobuf Duration's range (10,000 years).
    const int64_t us =
        std::min<int64_t>(absl::ToInt64Microseconds(l.idle_session_ttl), int64_t{315576000000} * 1000000);
    limits->mutable_idle_session_ttl()->set_seconds(us / 1000000);
    limits->mutable_idle_session_ttl()->set_nanos(static_cast<int32_t>(us % 1000000) * 1000);
  }
  const PagePoolStats ps = sessions_->pool()->Stats();
  const KvGeometry& g = sessions_->pool()->geometry();
  v1::KvCacheInfo* kv = response->mutable_kv_cache();
  kv->set_dtype(KvDtypeName(g.dtype));
  kv->set_page_tokens(g.page_tokens);
  kv->set_page_bytes(ps.page_bytes);
  kv->set_max_pages(ps.max_pages);
  kv->set_pages_in_use(ps.pages_in_use);
  kv->set_pages_shared(ps.pages_shared);
  kv->set_page_references(ps.page_references);
  kv->set_bytes_in_use(ps.bytes_in_use());
  kv->set_bytes_saved_by_sharing(ps.bytes_saved_by_sharing());
  kv->set_pages_cached(ps.pages_cached);
  kv->set_bytes_cached(ps.pages_cached * ps.page_bytes);
  kv->set_pages_mapped(ps.pages_mapped);
  kv->set_bytes_mapped(ps.pages_mapped * ps.page_bytes);
  kv->set_warm_target_pages(ps.pages_warm_target);
  if (absl::StatusOr<Principal> caller = CallerOf(ctx); caller.ok()) {
    FillTenantInfo(*caller, tenant_usage_, response->mutable_tenant());
  }
  response->set_sessions(sessions_->session_count());
  response->set_resident_sessions(sessions_->resident_count());
  response->set_threads(engine_->threads());
  response->set_kernels(facts_.kernels);
  response->set_replica(facts_.replica);
  const EngineStats es = engine_->Stats();
  v1::EngineCounters* counters = response->mutable_engine();
  counters->set_steps(es.steps);
  counters->set_prefill_tokens(es.prefill_tokens);
  counters->set_decode_tokens(es.decode_tokens);
  counters->set_cached_tokens(es.cached_tokens);
  counters->set_active_jobs(es.active_jobs);
  counters->set_queued_jobs(es.queued_jobs);
  const StoreStats ss = sessions_->store()->Stats();
  v1::StoreInfo* store = response->mutable_store();
  store->set_pages(ss.pages);
  store->set_page_bytes(ss.page_bytes);
  store->set_page_references(ss.page_references);
  store->set_sessions(ss.sessions);
  store->set_checkpoints(ss.checkpoints);
  store->set_corrupt_records(ss.corrupt_records);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace kvs

namespace kvs {

grpc::ServerUnaryReactor* KvSessionService::Tokenize(grpc::CallbackServerContext* ctx,
                                                     const v1::TokenizeRequest* request,
                                                     v1::TokenizeResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (!request->has_input() || InputEmpty(request->input())) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "input is empty"));
    return reactor;
  }
  if (absl::Status st = request->session_id().empty() ? absl::OkStatus()
                                                      : CheckSessionId("session_id", request->session_id());
      !st.ok()) {
    reactor->Finish(ToGrpc(st));
    return reactor;
  }
  // Small inputs tokenize here at once (well under a millisecond). A
  // mebibyte of text takes a good part of a second: off gRPC's callback
  // threads, which every other call needs, one at a time, a bounded number
  // waiting; one whose client left or whose deadline passed meanwhile is
  // not worked on.
  if (request->input().ByteSizeLong() <= kInlineTokenizeBytes) {
    reactor->Finish(ToGrpc(TokenizeNow(*request, response)));
    return reactor;
  }
  if (tokenizing_->queued() >= kMaxQueuedTokenizes) {
    reactor->Finish(ToGrpc(absl::ResourceExhaustedError(absl::StrCat(
        kMaxQueuedTokenizes, " large Tokenize calls (over ", kInlineTokenizeBytes >> 10,
        " KiB of input) wait already; retry later"))));
    return reactor;
  }
  tokenizing_->Submit([this, ctx, reactor, request, response] {
    if (ctx->IsCancelled()) return reactor->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
    reactor->Finish(ToGrpc(TokenizeNow(*request, response)));
  });
  return reactor;
}

absl::Status KvSessionService::TokenizeNow(const v1::TokenizeRequest& request,
                                           v1::TokenizeResponse* response) const {
  std::vector<int32_t> base;  // what the session holds before
  ChatState chat;
  const bool new_session = request.session_id().empty();
  if (new_session) {
    const Tokenizer& tok = model_.tokenizer();
    if (tok.add_bos() && tok.bos_id() >= 0) base.push_back(tok.bos_id());
  } else {
    absl::StatusOr<SessionInfo> info = sessions_->Get(request.session_id(), /*include_tokens=*/true);
    if (!info.ok()) return info.status();
    base = std::move(info->tokens);
    chat = info->chat;
  }
  GenerationPromptChoice prompt_choice;
  prompt_choice.enable_thinking = !request.has_enable_thinking() || request.enable_thinking();
  // Without add_generation_prompt, count the input alone (as Append adds it).
  if (!request.add_generation_prompt()) prompt_choice.add = false;
  absl::StatusOr<ResolvedInput> ids = inputs_.Resolve(&request.input(), base, chat, &prompt_choice);
  if (!ids.ok()) return ids.status();
  // Token ids are checked like Append's (the range; no context limit).
  for (int32_t id : ids->ids) {
    if (id < 0 || id >= model_.config().vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", id, " is outside the vocabulary [0, ",
                                                     model_.config().vocab_size, ")"));
    }
  }
  std::vector<int32_t> out;
  if (new_session) out = base;
  out.insert(out.end(), ids->ids.begin(), ids->ids.end());
  response->mutable_token_ids()->Add(out.begin(), out.end());
  response->set_text(inputs_.Decode(out, /*include_special=*/true));
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* KvSessionService::Detokenize(grpc::CallbackServerContext* ctx,
                                                       const v1::DetokenizeRequest* request,
                                                       v1::DetokenizeResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const int max = sessions_->limits().max_context;
  absl::Status st;
  if (request->token_ids_size() > max) {
    st = absl::InvalidArgumentError(absl::StrCat("at most ", max, " token ids (the context limit), got ",
                                                 request->token_ids_size()));
  }
  for (int32_t id : request->token_ids()) {
    if (!st.ok()) break;
    if (id < 0 || id >= model_.config().vocab_size) {
      st = absl::InvalidArgumentError(absl::StrCat("token id ", id, " is outside the vocabulary [0, ",
                                                   model_.config().vocab_size, ")"));
    }
  }
  if (st.ok()) {
    response->set_text(inputs_.Decode(
        std::vector<int32_t>(request->token_ids().begin(), request->token_ids().end()),
        request->include_special()));
  }
  reactor->Finish(ToGrpc(st));
  return reactor;
}

}  // namespace kvs
