#include "client/migration.h"

#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kvs {
namespace v1 = kvsession::v1;
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;

// One item (a session or a checkpoint) from `from` to `to`, pages deduped.
absl::StatusOr<v1::ImportSessionResponse> MoveOne(KvSessionClient& from, KvSessionClient& to,
                                                  v1::ExportSessionRequest request,
                                                  MigrationReport* report) {
  v1::ExportSessionRequest list = request;
  list.set_page_hashes_only(true);
  absl::StatusOr<ExportedSession> hashes = ExportSession(from, list);
  if (!hashes.ok()) return hashes.status();
  const std::vector<std::string> all(hashes->first.page_hashes().begin(),
                                     hashes->first.page_hashes().end());
  absl::StatusOr<std::vector<std::string>> missing = FindMissingPages(to, all);
  if (!missing.ok()) return missing.status();
  const absl::flat_hash_set<std::string> lacks(missing->begin(), missing->end());
  for (const std::string& h : all) {
    if (!lacks.contains(h)) request.add_omit_pages(h);
  }
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<ExportedSession> stream = ExportSession(from, request);
    if (!stream.ok()) return stream.status();
    absl::StatusOr<v1::ImportSessionResponse> done = ImportSession(to, stream->bytes);
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

absl::StatusOr<ExportedSession> ExportSession(KvSessionClient& from,
                                              const v1::ExportSessionRequest& request) {
  grpc::ClientContext ctx;
  from.PrepareContext(&ctx);
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

absl::StatusOr<v1::ImportSessionResponse> ImportSession(KvSessionClient& to, const std::string& stream) {
  grpc::ClientContext ctx;
  to.PrepareContext(&ctx);
  v1::ImportSessionResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::ImportChunk>> writer =
      to.stub()->ImportSession(&ctx, &response);
  v1::ImportChunk chunk;
  for (size_t at = 0; at < stream.size(); at += kChunkBytes) {
    chunk.set_data(stream.substr(at, kChunkBytes));
    if (!writer->Write(chunk)) break;  // the server ended the call: Finish says why
  }
  writer->WritesDone();
  if (absl::Status s = FromGrpc(writer->Finish()); !s.ok()) return s;
  return response;
}

absl::StatusOr<std::vector<std::string>> FindMissingPages(KvSessionClient& to,
                                                          const std::vector<std::string>& hashes) {
  grpc::ClientContext ctx;
  to.PrepareContext(&ctx);
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
  if (absl::StatusOr<v1::ImportSessionResponse> done = MoveOne(from, to, request, &report); !done.ok()) {
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
    absl::StatusOr<v1::ImportSessionResponse> done = MoveOne(from, to, c, &report);
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
