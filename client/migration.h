// Moving sessions between kvsessiond replicas with the migration RPCs
// (ExportSession, FindMissingPages, ImportSession; docs/api.md).
//
// MigrateSession(from, to, id): exports the session from `from`, leaving
// out the KV pages `to` already holds (FindMissingPages), imports it into
// `to`, checks that `to` has the same tokens, and then (unless keep_source)
// deletes it from `from`. With with_checkpoints, the session's checkpoints
// on `from` move the same way (after the session; deleted from `from` only
// once all moved). A session busy on `from` is ABORTED before anything
// moves; one that changes on `from` while it is copied (a call ran) is
// taken back out of `to` and the answer is ABORTED (try again), unless
// `to`'s copy changed too (calls already reached it): then both are kept
// and the ABORTED message says so. The window
// between that last check and the delete on `from` remains: stop routing
// calls to `from` first when draining it. An import that fails because `to` dropped a page it said
// it held meanwhile is retried once with every page. On any error nothing
// is deleted from `from`; what was already imported into `to` stays there
// (and is reported in the error message), so rerunning after fixing the
// cause reports ALREADY_EXISTS for those items. The one exception: when the
// session was deleted from `from` and deleting a checkpoint there then
// fails, the error names the checkpoints still on `from`. Each migration
// call has a deadline (MigrateOptions::timeout, else a default by its size:
// MigrationCallTimeout below); one past it ends the move DEADLINE_EXCEEDED
// like any other error.
//
// Thread-compatible; the clients may be shared.
#ifndef KVSESSION_CLIENT_MIGRATION_H_
#define KVSESSION_CLIENT_MIGRATION_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/kvsession_client.h"

namespace kvs {

struct MigrateOptions {
  bool with_checkpoints = false;
  bool keep_source = false;
  // The deadline of each migration call it makes (every ExportSession,
  // FindMissingPages and ImportSession below); unset: each call's default.
  std::optional<std::chrono::milliseconds> timeout;
};

struct MigrationReport {
  int sessions = 0;
  std::vector<std::string> checkpoints;  // moved checkpoint ids
  int64_t pages_sent = 0;                // pages in the streams
  int64_t pages_skipped = 0;             // pages `to` already held (dedup)
  int64_t bytes = 0;                     // stream bytes sent
};

absl::StatusOr<MigrationReport> MigrateSession(KvSessionClient& from, KvSessionClient& to,
                                               const std::string& session_id,
                                               const MigrateOptions& options = {});

// The building blocks. Each call has a deadline: `timeout` from its start,
// or by default MigrationCallTimeout of the bytes it carries (an export,
// whose size is not known before, gets the largest stream's: 1 GiB). A call
// past it ends DEADLINE_EXCEEDED, also when the server stopped answering.
//
// The default deadline of a call carrying `bytes`: 60 s plus 1 s per MiB
// (a link of at least 1 MiB/s; a 1 GiB stream gets about 18 minutes).
std::chrono::milliseconds MigrationCallTimeout(int64_t bytes);

// A whole exported stream and its first chunk's facts.
struct ExportedSession {
  std::string bytes;
  kvsession::v1::ExportChunk first;  // page_hashes, pages_sent, pages_omitted
};
absl::StatusOr<ExportedSession> ExportSession(KvSessionClient& from,
                                              const kvsession::v1::ExportSessionRequest& request,
                                              std::optional<std::chrono::milliseconds> timeout = std::nullopt);
// Sends `stream` in chunks of at most 1 MiB, then half-closes, and returns
// the server's answer (the statuses: docs/api.md, ImportSession). A server
// that refuses the stream part way (RESOURCE_EXHAUSTED past its
// --max-migration-mb, DATA_LOSS for bytes that are not a stream) ends the
// call at once: the rest is not sent, and that status returns. It returns
// at most about a second after its deadline also when the server stopped
// reading the stream (a frozen process; gRPC cannot cancel a write stuck
// on its socket): DEADLINE_EXCEEDED, the call cancelled and left to end on
// gRPC's threads. After DEADLINE_EXCEEDED `to` may still have imported the
// stream (the answer came too late): GetSession on `to` tells.
absl::StatusOr<kvsession::v1::ImportSessionResponse> ImportSession(
    KvSessionClient& to, const std::string& stream,
    std::optional<std::chrono::milliseconds> timeout = std::nullopt);
absl::StatusOr<std::vector<std::string>> FindMissingPages(
    KvSessionClient& to, const std::vector<std::string>& hashes,
    std::optional<std::chrono::milliseconds> timeout = std::nullopt);

}  // namespace kvs

#endif  // KVSESSION_CLIENT_MIGRATION_H_
