#include "tools/load/load_worker.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"

namespace kvs::load {
namespace v1 = kvsession::v1;
namespace {

// Operation mix (relative weights), in the order of Op.
enum class Op {
  kCreate, kAppend, kGenerate, kFork, kSnapshot, kRestore, kRestoreSession, kGet, kList, kDelete,
  kDeleteCheckpoint, kTruncate, kForeignGet
};
constexpr struct {
  Op op;
  const char* name;
  int weight;
} kMix[] = {
    {Op::kCreate, "create", 8},
    {Op::kAppend, "append", 18},
    {Op::kGenerate, "generate", 30},
    {Op::kFork, "fork", 8},
    {Op::kSnapshot, "snapshot", 8},
    {Op::kRestore, "restore", 5},
    {Op::kRestoreSession, "restore-session", 2},
    {Op::kGet, "get", 8},
    {Op::kList, "list", 3},
    {Op::kDelete, "delete", 6},
    {Op::kDeleteCheckpoint, "delete-checkpoint", 2},
    {Op::kTruncate, "truncate", 4},
    {Op::kForeignGet, "foreign-get", 3},  // only with tenants
};
constexpr auto kUnavailablePause = std::chrono::milliseconds(10);
constexpr int kMaxAppendTokens = 8;
constexpr int kMaxGenerateTokens = 12;
constexpr int kMaxForkCount = 2;
// Ids below this are left alone (BOS, EOS and other control tokens).
constexpr int32_t kFirstPlainToken = 3;

}  // namespace

size_t SessionTarget(int target_sessions, const std::vector<LoadQuota>& quotas) {
  int64_t target = std::max(1, target_sessions);
  for (const LoadQuota& q : quotas) {
    if (q.name == "max_sessions") target = std::min(target, q.limit);
  }
  return static_cast<size_t>(std::max<int64_t>(1, target));
}

std::vector<std::string> OperationNames() {
  std::vector<std::string> names;
  for (const auto& m : kMix) names.push_back(m.name);
  return names;
}

LoadWorker::LoadWorker(uint64_t seed, const WorkloadOptions& options, const Caller& caller, ServerLink& link,
                       SessionLedger& ledger, std::vector<SessionLedger*> other_tenants, LoadStats& stats)
    : rng_(seed),
      options_(options),
      caller_(caller),
      link_(link),
      ledger_(ledger),
      other_tenants_(std::move(other_tenants)),
      stats_(stats),
      session_target_(SessionTarget(options.target_sessions, caller.quotas)) {
  for (const auto& m : kMix) {
    const bool runs = !options_.skipped_ops.count(m.name) && (m.op != Op::kForeignGet || !other_tenants_.empty());
    weights_.push_back(runs ? m.weight : 0);
  }
}

void LoadWorker::Run(const std::atomic<bool>& stop) {
  while (true) {
    std::optional<ServerLink::Lease> lease = link_.BeginOperation(stop);
    if (!lease) return;
    if (!client_ || client_epoch_ != lease->epoch) {
      client_ = std::make_unique<KvSessionClient>(lease->address, caller_.security);
      client_epoch_ = lease->epoch;
    }
    epoch_ = lease->epoch;
    RunOne();
    link_.EndOperation();
  }
}

void LoadWorker::RunOne() {
  Op op = kMix[std::discrete_distribution<size_t>(weights_.begin(), weights_.end())(rng_)].op;
  const size_t live = ledger_.live_sessions();
  const size_t target = session_target_;
  if (live < std::max<size_t>(1, target / 2)) op = Op::kCreate;
  if ((op == Op::kCreate || op == Op::kFork || op == Op::kRestore) && live >= 2 * target) {
    op = Op::kDelete;
  }
  if (op == Op::kCreate && live >= target) op = Op::kGenerate;
  if (op == Op::kSnapshot && ledger_.live_checkpoints() >= 2 * target) op = Op::kDeleteCheckpoint;
  if (free_store_next_) {
    free_store_next_ = false;
    op = ledger_.live_checkpoints() > 0 && std::bernoulli_distribution(0.5)(rng_) ? Op::kDeleteCheckpoint
                                                                                  : Op::kDelete;
  }
  if (op != Op::kCreate && weights_[static_cast<size_t>(op)] == 0) return;  // skipped

  switch (op) {
    case Op::kCreate: return Create();
    case Op::kRestore: return Restore();
    case Op::kList: return List();
    case Op::kDeleteCheckpoint: return DeleteCheckpoint();
    case Op::kForeignGet: return ForeignGet();
    default: break;
  }
  std::optional<std::string> id = ledger_.PickSession(rng_);
  if (!id) return Create();
  const bool grows = op == Op::kAppend || op == Op::kGenerate || op == Op::kFork;
  if (grows && ledger_.AcknowledgedLength(*id) > options_.max_session_tokens) op = Op::kDelete;
  if (op == Op::kTruncate) return Truncate(*id);
  // Every other call on the session runs in a shared section (no Truncate
  // meanwhile: session_ledger.h); a session being truncated is left alone.
  if (!ledger_.EnterSession(*id)) return;
  switch (op) {
    case Op::kAppend: Append(*id); break;
    case Op::kGenerate: Generate(*id); break;
    case Op::kFork: Fork(*id); break;
    case Op::kSnapshot: Snapshot(*id); break;
    case Op::kRestoreSession: RestoreSession(*id); break;
    case Op::kGet: Get(*id); break;
    case Op::kDelete: Delete(*id); break;
    default: break;
  }
  ledger_.LeaveSession(*id);
}

std::vector<int32_t> LoadWorker::RandomTokens(int min_count, int max_count) {
  std::uniform_int_distribution<int32_t> token(kFirstPlainToken, options_.vocab_size - 1);
  std::vector<int32_t> ids(std::uniform_int_distribution<int>(min_count, max_count)(rng_));
  for (int32_t& id : ids) id = token(rng_);
  return ids;
}

std::string LoadWorker::RandomWords() {
  static constexpr const char* kWords[] = {"the", "cache", "holds", "a", "long", "conversation",
                                           "and", "forks", "it", "twice", "restore", "page"};
  std::uniform_int_distribution<int> count(1, 6), word(0, static_cast<int>(std::size(kWords)) - 1);
  std::string text;
  for (int n = count(rng_); n > 0; --n) absl::StrAppend(&text, text.empty() ? "" : " ", kWords[word(rng_)]);
  return text;
}

std::optional<std::vector<int32_t>> LoadWorker::TokenizeInput(const v1::TokenizeRequest& request,
                                                              SessionLedger::CallTicket* ticket) {
  const auto start = Clock::now();
  absl::StatusOr<v1::TokenizeResponse> r = client_->Tokenize(request);
  if (!r.ok()) {
    CallContext context;
    if (ticket != nullptr) {
      const SessionLedger::CallEnd end = ledger_.EndCall(*ticket);
      context = {.overlapped_on_session = end.overlapped, .target_deleted = end.deleted};
    }
    Fail("Tokenize", r.status(), context);
    return std::nullopt;
  }
  stats_.RecordOk("Tokenize", MillisSince(start));
  return std::vector<int32_t>(r->token_ids().begin(), r->token_ids().end());
}

double LoadWorker::MillisSince(Clock::time_point start) const {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

Classification LoadWorker::Fail(const std::string& method, const absl::Status& status,
                                CallContext context) {
  context.kill_window = link_.KillWindow(epoch_);
  context.caller_has_quota = !caller_.quotas.empty();
  Classification c = ClassifyError(status, context, options_.strict_busy);
  stats_.RecordError(method, status, c);
  if (c.kind == ErrorKind::kTenantQuota && RefusedQuota(status) == "max_store_bytes") {
    free_store_next_ = true;
  }
  // A server that went away by itself: do not spin until the controller sees it.
  if (absl::IsUnavailable(status)) std::this_thread::sleep_for(kUnavailablePause);
  return c;
}

void LoadWorker::FailMutation(const std::string& method, const std::string& id,
                              const absl::Status& status, const SessionLedger::CallEnd& end,
                              bool mid_stream) {
  CallContext context;
  context.overlapped_on_session = end.overlapped;
  context.recent_cancel_on_session = end.recent_cancel;
  context.target_deleted = end.deleted;
  context.mid_stream = mid_stream;
  Classification c = Fail(method, status, context);
  // A quota refusal changes nothing (docs/api.md, Quotas).
  const bool nothing_happened =
      IsBusy(status) || c.kind == ErrorKind::kDeletedTarget || c.kind == ErrorKind::kTenantQuota;
  if (!nothing_happened) ledger_.MarkUncertain(id);
}

void LoadWorker::Create() {
  v1::CreateSessionRequest req;
  bool chat = std::bernoulli_distribution(options_.chat_fraction)(rng_);
  std::vector<int32_t> input;
  if (chat) {
    for (const char* role : {"system", "user"}) {
      v1::ChatMessage* m = req.mutable_input()->mutable_messages()->add_messages();
      m->set_role(role);
      m->set_content(RandomWords());
    }
    // The rendered conversation's tokens, known before it is sent: the
    // ledger then checks them like any other; one longer than the session
    // cap (a small context, a vocabulary of characters) goes as token ids.
    v1::TokenizeRequest count;
    *count.mutable_input() = req.input();
    std::optional<std::vector<int32_t>> rendered = TokenizeInput(count);
    if (!rendered) return;
    if (static_cast<int32_t>(rendered->size()) <= options_.max_session_tokens) {
      input = std::move(*rendered);
    } else {
      chat = false;
      req.clear_input();
    }
  }
  if (!chat) {
    input = RandomTokens(1, kMaxAppendTokens);
    *req.mutable_input()->mutable_tokens()->mutable_ids() = {input.begin(), input.end()};
  }
  const char* method = chat ? "CreateSession(chat)" : "CreateSession";  // (the report's methods)
  req.mutable_labels()->insert({std::string("kvs-load"), std::string("1")});
  const auto start = Clock::now();
  absl::StatusOr<v1::Session> r = client_->CreateSession(req);
  if (!r.ok()) {
    Fail(method, r.status(), {});
    return;
  }
  stats_.RecordOk(method, MillisSince(start));
  if (chat) {  // Tokenize gave the session's whole content, BOS included
    if (r->length() != static_cast<int32_t>(input.size())) {
      stats_.RecordWrongResult(method, absl::StrCat("length ", r->length(), " for a conversation Tokenize made ",
                                                    input.size(), " tokens"));
      input.assign(std::max(r->length(), 0), kUnknownToken);
    }
    ledger_.AckNewSession(r->id(), std::move(input));
    return;
  }
  std::vector<int32_t> tokens;
  const int32_t n = static_cast<int32_t>(input.size());
  if (r->length() == n + 1 && options_.bos_token_id >= 0) {
    tokens.push_back(options_.bos_token_id);
  } else if (r->length() != n) {
    stats_.RecordWrongResult("CreateSession", absl::StrCat("length ", r->length(), " for ", n,
                                                           " input tokens"));
    tokens.assign(r->length() - n > 0 ? r->length() - n : 0, kUnknownToken);
  }
  tokens.insert(tokens.end(), input.begin(), input.end());
  ledger_.AckNewSession(r->id(), std::move(tokens));
}

void LoadWorker::Append(const std::string& id) {
  std::vector<int32_t> input;
  v1::AppendRequest req;
  req.set_session_id(id);
  const bool chat = std::bernoulli_distribution(options_.chat_fraction)(rng_);
  const char* method = chat ? "Append(chat)" : "Append";  // (the report's methods)
  // One ticket from the count to the Append: when no other call of ours
  // ran on the session meanwhile, the turn's tokens are what Tokenize said.
  SessionLedger::CallTicket ticket = ledger_.BeginCall(id);
  if (chat) {
    v1::ChatMessage* m = req.mutable_input()->mutable_messages()->add_messages();
    m->set_role("user");
    m->set_content(RandomWords());
    v1::TokenizeRequest count;
    *count.mutable_input() = req.input();
    count.set_session_id(id);
    std::optional<std::vector<int32_t>> turn = TokenizeInput(count, &ticket);
    if (!turn) return;
    // The session cap counts the rendered turn (chat markup included).
    if (ledger_.AcknowledgedLength(id) + static_cast<int32_t>(turn->size()) > options_.max_session_tokens) {
      ledger_.EndCall(ticket);
      return Delete(id);
    }
    input = std::move(*turn);
  } else {
    input = RandomTokens(1, kMaxAppendTokens);
    *req.mutable_input()->mutable_tokens()->mutable_ids() = {input.begin(), input.end()};
  }
  const auto start = Clock::now();
  absl::StatusOr<v1::AppendResponse> r = client_->Append(req);
  SessionLedger::CallEnd end = ledger_.EndCall(ticket);
  if (!r.ok()) return FailMutation(method, id, r.status(), end);
  stats_.RecordOk(method, MillisSince(start));
  // Tokens after an end-of-turn the server added, or a chat turn rendered
  // after another call changed the session: not known here.
  if (r->usage().prompt_tokens() != static_cast<int32_t>(input.size()) || (chat && end.overlapped)) {
    input.clear();
  }
  if (absl::Status st = ledger_.AckAppend(id, r->session().length(), input); !st.ok()) {
    stats_.RecordWrongResult(method, std::string(st.message()));
  }
}

void LoadWorker::Generate(const std::string& id) {
  v1::GenerateRequest req;
  req.set_session_id(id);
  req.set_max_tokens(std::uniform_int_distribution<int>(1, kMaxGenerateTokens)(rng_));
  std::vector<int32_t> input;
  if (std::bernoulli_distribution(0.3)(rng_)) {
    input = RandomTokens(1, 4);
    *req.mutable_input()->mutable_tokens()->mutable_ids() = {input.begin(), input.end()};
  }
  const bool cancel = std::bernoulli_distribution(options_.cancel_fraction)(rng_);
  const auto start = Clock::now();
  double ttft_ms = -1;
  auto on_message = [&](const v1::GenerateResponse& m) {
    if (ttft_ms < 0 && m.token_ids_size() > 0) ttft_ms = MillisSince(start);
    return !(cancel && ttft_ms >= 0);
  };
  GenerateResult partial;
  SessionLedger::CallTicket ticket = ledger_.BeginCall(id);
  absl::StatusOr<GenerateResult> r = client_->Generate(req, on_message, std::nullopt, &partial);
  SessionLedger::CallEnd end = ledger_.EndCall(ticket);
  if (!r.ok()) {
    stats_.RecordGenerate(ttft_ms, static_cast<int64_t>(partial.ids.size()));
    if (cancel && absl::IsCancelled(r.status())) {
      stats_.RecordCancel();
      ledger_.MarkUncertain(id, /*cancelled=*/true);
      return;
    }
    return FailMutation("Generate", id, r.status(), end, !partial.ids.empty());
  }
  stats_.RecordOk("Generate", MillisSince(start));
  stats_.RecordGenerate(ttft_ms, static_cast<int64_t>(r->ids.size()));
  const v1::FinishReason why = r->finish_reason;
  if (why != v1::FINISH_REASON_STOP_TOKEN && why != v1::FINISH_REASON_STOP_SEQUENCE &&
      why != v1::FINISH_REASON_LENGTH) {
    stats_.RecordWrongResult("Generate", absl::StrCat("OK with finish reason ", FinishReasonName(why)));
    ledger_.MarkUncertain(id);
    return;
  }
  // On a chat session the call may add more than its input (a generation
  // prompt, an end-of-turn): then only the generated tokens are known.
  if (r->usage.prompt_tokens() != static_cast<int32_t>(input.size())) input.clear();
  input.insert(input.end(), r->ids.begin(), r->ids.end());
  if (absl::Status st = ledger_.AckAppend(id, r->usage.session_tokens(), input); !st.ok()) {
    stats_.RecordWrongResult("Generate", std::string(st.message()));
  }
}

void LoadWorker::Fork(const std::string& id) {
  v1::ForkRequest req;
  req.set_session_id(id);
  req.set_count(std::uniform_int_distribution<int>(1, kMaxForkCount)(rng_));
  const auto start = Clock::now();
  SessionLedger::CallTicket ticket = ledger_.BeginCall(id);
  absl::StatusOr<v1::ForkResponse> r = client_->Fork(req);
  SessionLedger::CallEnd end = ledger_.EndCall(ticket);
  if (!r.ok()) {
    Fail("Fork", r.status(), {.overlapped_on_session = end.overlapped,
                              .recent_cancel_on_session = end.recent_cancel,
                              .target_deleted = end.deleted});
    return;
  }
  stats_.RecordOk("Fork", MillisSince(start));
  if (r->sessions_size() != req.count()) {
    stats_.RecordWrongResult("Fork", absl::StrCat(r->sessions_size(), " branches for count ", req.count()));
  }
  for (const v1::Session& branch : r->sessions()) {
    ledger_.AckNewSession(branch.id(), ledger_.KnownPrefix(id, branch.length()));
  }
}

void LoadWorker::Snapshot(const std::string& id) {
  const auto start = Clock::now();
  SessionLedger::CallTicket ticket = ledger_.BeginCall(id);
  absl::StatusOr<v1::Checkpoint> r = client_->Snapshot(id, "kvs-load");
  SessionLedger::CallEnd end = ledger_.EndCall(ticket);
  if (!r.ok()) {
    Fail("Snapshot", r.status(), {.overlapped_on_session = end.overlapped,
                                  .recent_cancel_on_session = end.recent_cancel,
                                  .target_deleted = end.deleted});
    return;
  }
  stats_.RecordOk("Snapshot", MillisSince(start));
  ledger_.AckSnapshot(r->id(), r->length(), ledger_.KnownPrefix(id, r->length()));
}

void LoadWorker::Restore() {
  std::optional<std::string> checkpoint = ledger_.PickCheckpoint(rng_);
  if (!checkpoint) return;
  const auto start = Clock::now();
  absl::StatusOr<v1::Session> r = client_->RestoreCheckpoint(*checkpoint);
  if (!r.ok()) {
    Fail("Restore", r.status(), {.target_deleted = ledger_.CheckpointDeleted(*checkpoint)});
    return;
  }
  stats_.RecordOk("Restore", MillisSince(start));
  std::vector<int32_t> tokens = ledger_.CheckpointTokens(*checkpoint);
  if (r->length() != static_cast<int32_t>(tokens.size())) {
    stats_.RecordWrongResult("Restore", absl::StrCat("length ", r->length(), ", checkpoint has ",
                                                     tokens.size()));
    tokens.resize(r->length(), kUnknownToken);
  }
  ledger_.AckNewSession(r->id(), std::move(tokens));
}

void LoadWorker::RestoreSession(const std::string& id) {
  const auto start = Clock::now();
  SessionLedger::CallTicket ticket = ledger_.BeginCall(id);
  absl::StatusOr<v1::Session> r = client_->RestoreSession(id);
  SessionLedger::CallEnd end = ledger_.EndCall(ticket);
  if (!r.ok()) {
    Fail("RestoreSession", r.status(), {.overlapped_on_session = end.overlapped,
                                        .recent_cancel_on_session = end.recent_cancel,
                                        .target_deleted = end.deleted});
    return;
  }
  stats_.RecordOk("RestoreSession", MillisSince(start));
}

void LoadWorker::Get(const std::string& id) {
  const auto start = Clock::now();
  absl::StatusOr<v1::Session> r = client_->GetSession(id, /*include_tokens=*/true);
  if (!r.ok()) {
    Fail("GetSession", r.status(), {.target_deleted = ledger_.SessionDeleted(id)});
    return;
  }
  stats_.RecordOk("GetSession", MillisSince(start));
  // No Truncate ran meanwhile (the section), so tokens were only added:
  // every position the ledger knows must match.
  std::vector<int32_t> known = ledger_.KnownPrefix(id, r->token_ids_size());
  for (int i = 0; i < r->token_ids_size(); ++i) {
    if (known[i] != kUnknownToken && known[i] != r->token_ids(i)) {
      stats_.RecordWrongResult("GetSession", absl::StrCat("session ", id, ": token at ", i, " is ",
                                                          r->token_ids(i), ", acknowledged ", known[i]));
      return;
    }
  }
}

void LoadWorker::Truncate(const std::string& id) {
  if (!ledger_.BeginTruncate(id)) return;
  // Alone on the session: its acknowledged length cannot change meanwhile.
  const int32_t min_length = options_.bos_token_id >= 0 ? 1 : 0;
  const int32_t acked = ledger_.AcknowledgedLength(id);
  if (acked - 1 < min_length) return ledger_.TruncateRejected(id);
  const int32_t length = std::uniform_int_distribution<int32_t>(min_length, acked - 1)(rng_);
  const auto start = Clock::now();
  SessionLedger::CallTicket ticket = ledger_.BeginCall(id);
  absl::StatusOr<v1::TruncateResponse> r = client_->Truncate(id, length);
  SessionLedger::CallEnd end = ledger_.EndCall(ticket);
  if (!r.ok()) {
    Classification c = Fail("Truncate", r.status(), {.overlapped_on_session = end.overlapped,
                                                     .recent_cancel_on_session = end.recent_cancel,
                                                     .target_deleted = end.deleted});
    if (IsBusy(r.status()) || c.kind == ErrorKind::kDeletedTarget) return ledger_.TruncateRejected(id);
    return ledger_.TruncateUnknown(id, length);
  }
  stats_.RecordOk("Truncate", MillisSince(start));
  if (r->session().length() != length) {
    stats_.RecordWrongResult("Truncate", absl::StrCat("length ", r->session().length(), " after a Truncate to ",
                                                      length));
    return ledger_.TruncateUnknown(id, std::min(length, r->session().length()));
  }
  ledger_.AckTruncate(id, length);
}

void LoadWorker::List() {
  const auto start = Clock::now();
  absl::StatusOr<v1::ListSessionsResponse> r = client_->ListSessions(100, "");
  if (!r.ok()) {
    Fail("ListSessions", r.status(), {});
    return;
  }
  stats_.RecordOk("ListSessions", MillisSince(start));
  std::vector<std::string> ids;
  for (const v1::Session& s : r->sessions()) ids.push_back(s.id());
  if (std::optional<std::string> foreign = ForeignId(ids)) {
    stats_.RecordWrongResult("ListSessions", absl::StrCat("tenant ", caller_.tenant, " was listed session ",
                                                          *foreign, " of another tenant"));
  }
}

std::optional<std::string> LoadWorker::ForeignId(const std::vector<std::string>& ids) const {
  for (const std::string& id : ids) {
    for (const SessionLedger* other : other_tenants_) {
      if (other->Tracks(id)) return id;
    }
  }
  return std::nullopt;
}

void LoadWorker::ForeignGet() {
  SessionLedger& other =
      *other_tenants_[std::uniform_int_distribution<size_t>(0, other_tenants_.size() - 1)(rng_)];
  std::optional<std::string> id = other.PickSession(rng_);
  if (!id) return;
  const auto start = Clock::now();
  absl::StatusOr<v1::Session> r = client_->GetSession(*id, /*include_tokens=*/false);
  if (absl::IsNotFound(r.status())) {
    stats_.RecordOk("GetSession:foreign", MillisSince(start));
  } else if (r.ok()) {
    stats_.RecordWrongResult("GetSession:foreign",
                             absl::StrCat("tenant ", caller_.tenant, " read session ", *id, " of another tenant"));
  } else {
    Fail("GetSession:foreign", r.status(), {});
  }
}

void LoadWorker::Delete(const std::string& id) {
  if (!ledger_.BeginDelete(id)) return;
  const auto start = Clock::now();
  SessionLedger::CallTicket ticket = ledger_.BeginCall(id);
  absl::Status st = client_->DeleteSession(id);
  SessionLedger::CallEnd end = ledger_.EndCall(ticket);
  if (st.ok()) {
    stats_.RecordOk("DeleteSession", MillisSince(start));
    ledger_.AckDelete(id);
    return;
  }
  Fail("DeleteSession", st, {.overlapped_on_session = end.overlapped,
                             .recent_cancel_on_session = end.recent_cancel});
  if (IsBusy(st)) {
    ledger_.DeleteRejected(id);
  } else {
    ledger_.DeleteUnknown(id);
  }
}

void LoadWorker::DeleteCheckpoint() {
  std::optional<std::string> checkpoint = ledger_.PickCheckpoint(rng_);
  if (!checkpoint || !ledger_.BeginDeleteCheckpoint(*checkpoint)) return;
  const auto start = Clock::now();
  absl::Status st = client_->DeleteCheckpoint(*checkpoint);
  if (st.ok()) {
    stats_.RecordOk("DeleteCheckpoint", MillisSince(start));
    ledger_.AckDeleteCheckpoint(*checkpoint);
    return;
  }
  Fail("DeleteCheckpoint", st, {});
  ledger_.DeleteCheckpointUnknown(*checkpoint);
}

}  // namespace kvs::load
