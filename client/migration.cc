#include "client/migration.h"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kvs {
namespace v1 = kvsession::v1;
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;
constexpr int64_t kMaxStreamBytes = int64_t{1} << 30;  // the server's limit (docs/api.md)

// Sets the call's deadline: `timeout`, else MigrationCallTimeout(bytes).
void SetDeadline(grpc::ClientContext* ctx, std::optional<std::chrono::milliseconds> timeout, int64_t bytes) {
  ctx->set_deadline(std::chrono::system_clock::now() + timeout.value_or(MigrationCallTimeout(bytes)));
}

// One item (a session or a checkpoint) from `from` to `to`, pages deduped.
absl::StatusOr<v1::ImportSessionResponse> MoveOne(KvSessionClient& from, KvSessionClient& to,
                                                  v1::ExportSessionRequest request,
                                                  const MigrateOptions& options, MigrationReport* report) {
  v1::ExportSessionRequest list = request;
  list.set_page_hashes_only(true);
  absl::StatusOr<ExportedSession> hashes = ExportSession(from, list, options.timeout);
  if (!hashes.ok()) return hashes.status();
  const std::vector<std::string> all(hashes->first.page_hashes().begin(),
                                     hashes->first.page_hashes().end());
  absl::StatusOr<std::vector<std::string>> missing = FindMissingPages(to, all, options.timeout);
  if (!missing.ok()) return missing.status();
  const absl::flat_hash_set<std::string> lacks(missing->begin(), missing->end());
  for (const std::string& h : all) {
    if (!lacks.contains(h)) request.add_omit_pages(h);
  }
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<ExportedSession> stream = ExportSession(from, request, options.timeout);
    if (!stream.ok()) return stream.status();
    absl::StatusOr<v1::ImportSessionResponse> done = ImportSession(to, stream->bytes, options.timeout);
    if (attempt == 0 && absl::IsFailedPrecondition(done.status()) &&
        absl::StrContains(done.status().message(), "neither in the stream")) {
      request.clear_omit_pages();  // `to` dropped a page meanwhile: send all
      continue;
    }
    if (!done.ok()) return done.status();
    report->pages_sent += stream->first.pages_sent();
    report->pages_skipped += stream->first.pages_omitted();
    report->bytes += static_cast<int64_t>(stream->bytes.size());
    return done;
  }
}

}  // namespace

std::chrono::milliseconds MigrationCallTimeout(int64_t bytes) {
  return std::chrono::seconds(60) + std::chrono::seconds(std::max<int64_t>(bytes, 0) >> 20);
}

absl::StatusOr<ExportedSession> ExportSession(KvSessionClient& from, const v1::ExportSessionRequest& request,
                                              std::optional<std::chrono::milliseconds> timeout) {
  grpc::ClientContext ctx;
  from.PrepareContext(&ctx);
  SetDeadline(&ctx, timeout, kMaxStreamBytes);  // its size is known only once it comes
  std::unique_ptr<grpc::ClientReader<v1::ExportChunk>> reader =
      from.stub()->ExportSession(&ctx, request);
  ExportedSession out;
  v1::ExportChunk chunk;
  bool first = true;
  while (reader->Read(&chunk)) {
    out.bytes.append(chunk.data());
    if (first) {
      out.first = chunk;
      out.first.clear_data();
      first = false;
    }
  }
  if (absl::Status s = FromGrpc(reader->Finish()); !s.ok()) return s;
  return out;
}

namespace {

// One ImportSession call on gRPC's callback API, so that the caller waits
// with a bound of its own. A blocking ClientWriter::Write has none: gRPC
// 1.51's HTTP/2 transport completes a send that is part of a socket write
// in progress only when that write ends, even after the deadline or
// TryCancel, and a write to a target that stopped reading (a frozen
// process, its socket full) does not end.
//
// The caller and the call share Shared (the context, the chunk in flight).
// The call reads the caller's stream only while the caller waits. Shared
// is never destroyed on a gRPC callback thread: the context may hold the
// last reference to the channel (the client may be gone), and the last
// channel destroyed there shuts down and joins gRPC's callback threads
// from one of them (gRPC 1.51 aborts). So in OnDone the call drops its
// reference before it hands the status to the waiting caller (who then
// holds the last one), or, when the caller has given up, on a thread of
// its own.
class ImportCall : public grpc::ClientWriteReactor<v1::ImportChunk> {
 public:
  struct Shared {
    grpc::ClientContext ctx;
    v1::ImportSessionResponse response;
    v1::ImportChunk chunk;  // the one in flight
    std::mutex mu;
    std::condition_variable answered;
    const std::string* stream = nullptr;  // guarded by mu; null once the caller gave up
    size_t next = 0;                      // guarded by mu; where the next chunk starts
    bool abandoned = false;               // guarded by mu; the caller gave up
    std::optional<grpc::Status> status;   // guarded by mu; OnDone's
  };

  explicit ImportCall(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}

  // After the stub bound the call to this reactor.
  void Start() {
    WriteNext();
    StartCall();
  }
  void OnWriteDone(bool ok) override {
    if (ok) WriteNext();  // else the call ended (the server's answer, the deadline): OnDone says why
  }
  void OnDone(const grpc::Status& status) override {
    std::shared_ptr<Shared> shared = std::move(shared_);
    delete this;
    Shared* const raw = shared.get();
    std::unique_lock<std::mutex> lock(raw->mu);
    if (raw->abandoned) {
      lock.unlock();
      std::thread([gone = std::move(shared)] {}).detach();
      return;
    }
    shared.reset();  // not the last: the caller waits, holding its own
    raw->status = status;
    raw->answered.notify_all();
  }

 private:
  // The next chunk, or the half-close after the last one; nothing once the
  // caller gave up (it cancels the call).
  void WriteNext() {
    std::unique_lock<std::mutex> lock(shared_->mu);
    if (shared_->stream == nullptr) return;
    if (shared_->next >= shared_->stream->size()) {
      lock.unlock();
      StartWritesDone();
      return;
    }
    shared_->chunk.set_data(shared_->stream->substr(shared_->next, kChunkBytes));
    shared_->next += kChunkBytes;
    lock.unlock();
    StartWrite(&shared_->chunk);
  }

  std::shared_ptr<Shared> shared_;
};

}  // namespace

absl::StatusOr<v1::ImportSessionResponse> ImportSession(KvSessionClient& to, const std::string& stream,
                                                        std::optional<std::chrono::milliseconds> timeout) {
  const std::chrono::milliseconds budget = timeout.value_or(MigrationCallTimeout(static_cast<int64_t>(stream.size())));
  const auto deadline = std::chrono::system_clock::now() + budget;
  auto shared = std::make_shared<ImportCall::Shared>();
  to.PrepareContext(&shared->ctx);
  shared->ctx.set_deadline(deadline);
  shared->stream = &stream;
  auto* call = new ImportCall(shared);
  to.stub()->async()->ImportSession(&shared->ctx, &shared->response, call);
  call->Start();
  std::unique_lock<std::mutex> lock(shared->mu);
  // gRPC ends the call at its deadline; the second after it is for that
  // end to arrive. Past it the call is stuck in a write: given up on.
  if (!shared->answered.wait_until(lock, deadline + std::chrono::seconds(1),
                                   [&] { return shared->status.has_value(); })) {
    shared->abandoned = true;
    shared->stream = nullptr;
    lock.unlock();
    shared->ctx.TryCancel();
    return absl::DeadlineExceededError(absl::StrCat(
        "ImportSession: no answer within ", budget.count(),
        " ms: the target stopped taking the stream; the call was cancelled"));
  }
  if (absl::Status s = FromGrpc(*shared->status); !s.ok()) return s;
  return shared->response;
}

absl::StatusOr<std::vector<std::string>> FindMissingPages(KvSessionClient& to,
                                                          const std::vector<std::string>& hashes,
                                                          std::optional<std::chrono::milliseconds> timeout) {
  grpc::ClientContext ctx;
  to.PrepareContext(&ctx);
  SetDeadline(&ctx, timeout, static_cast<int64_t>(hashes.size()) * 16);
  v1::FindMissingPagesRequest request;
  for (const std::string& h : hashes) request.add_page_hashes(h);
  v1::FindMissingPagesResponse response;
  if (absl::Status s = FromGrpc(to.stub()->FindMissingPages(&ctx, request, &response)); !s.ok()) {
    return s;
  }
  return std::vector<std::string>(response.missing_pages().begin(), response.missing_pages().end());
}

namespace {

bool SameTokens(const v1::Session& a, const v1::Session& b) {
  return a.length() == b.length() &&
         std::equal(a.token_ids().begin(), a.token_ids().end(), b.token_ids().begin(), b.token_ids().end());
}

}  // namespace

absl::StatusOr<MigrationReport> MigrateSession(KvSessionClient& from, KvSessionClient& to,
                                               const std::string& session_id,
                                               const MigrateOptions& options) {
  MigrationReport report;
  absl::StatusOr<v1::Session> before = from.GetSession(session_id, /*include_tokens=*/true);
  if (!before.ok()) return before.status();
  if (before->state() == v1::SESSION_STATE_BUSY) {
    return absl::AbortedError(absl::StrCat("session ", session_id,
                                           " is busy on the source (a call is running); try again"));
  }
  auto same = [&](const v1::Session& s) { return SameTokens(s, *before); };
  // What the target acknowledged importing (set once it has).
  std::optional<v1::Session> imported;
  // The source changed while it was copied: take the copies back out of
  // the target, so a retry starts clean, unless the target's copy has
  // changed too (calls already reach it): then neither side is deleted.
  auto changed = [&]() -> absl::Status {
    absl::StatusOr<v1::Session> on_target = to.GetSession(session_id, /*include_tokens=*/true);
    if (on_target.ok() && imported && !SameTokens(*on_target, *imported)) {
      return absl::AbortedError(absl::StrCat(
          "session ", session_id,
          " changed on the source and on the target while it was migrated; both copies were kept: "
          "stop routing calls to one of them, then delete it"));
    }
    (void)to.DeleteSession(session_id);
    for (const std::string& id : report.checkpoints) (void)to.DeleteCheckpoint(id);
    return absl::AbortedError(absl::StrCat("session ", session_id,
                                           " changed on the source while it was migrated; nothing "
                                           "moved; try again"));
  };
  std::vector<std::string> checkpoints;
  if (options.with_checkpoints) {
    absl::StatusOr<std::vector<v1::Checkpoint>> list = from.ListAllCheckpoints(session_id);
    if (!list.ok()) return list.status();
    for (const v1::Checkpoint& c : *list) checkpoints.push_back(c.id());
  }
  v1::ExportSessionRequest request;
  request.set_session_id(session_id);
  if (absl::StatusOr<v1::ImportSessionResponse> done = MoveOne(from, to, request, options, &report); !done.ok()) {
    return done.status();
  }
  report.sessions = 1;
  absl::StatusOr<v1::Session> after = to.GetSession(session_id, /*include_tokens=*/true);
  if (!after.ok()) return after.status();
  imported = *after;
  if (!same(*after)) return changed();
  for (const std::string& id : checkpoints) {
    v1::ExportSessionRequest c;
    c.set_checkpoint_id(id);
    absl::StatusOr<v1::ImportSessionResponse> done = MoveOne(from, to, c, options, &report);
    if (!done.ok()) {
      return absl::Status(done.status().code(),
                          absl::StrCat("checkpoint ", id, ": ", std::string(done.status().message()),
                                       " (already on the target: session ", session_id,
                                       report.checkpoints.empty() ? "" : ", checkpoints ",
                                       absl::StrJoin(report.checkpoints, ", "),
                                       "; nothing was deleted from the source)"));
    }
    report.checkpoints.push_back(id);
  }
  if (!options.keep_source) {
    absl::StatusOr<v1::Session> now = from.GetSession(session_id, /*include_tokens=*/true);
    if (!now.ok()) return now.status();
    if (!same(*now) || now->state() == v1::SESSION_STATE_BUSY) return changed();
    if (absl::Status s = from.DeleteSession(session_id); !s.ok()) return s;
    for (size_t i = 0; i < report.checkpoints.size(); ++i) {
      if (absl::Status s = from.DeleteCheckpoint(report.checkpoints[i]); !s.ok()) {
        std::vector<std::string> left(report.checkpoints.begin() + i, report.checkpoints.end());
        return absl::Status(s.code(), absl::StrCat("everything moved, and the session was deleted from the "
                                                   "source, but deleting checkpoint ", report.checkpoints[i],
                                                   " there failed: ", std::string(s.message()),
                                                   " (still on the source: ", absl::StrJoin(left, ", "), ")"));
      }
    }
  }
  return report;
}

}  // namespace kvs
