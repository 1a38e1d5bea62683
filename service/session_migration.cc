// SessionManager::Export and Import: a session or checkpoint between the
// store and a migration stream (cache/migration_stream.h).
//
// Export reads the store only (the persisted, acknowledged state), so it
// never waits for a busy session. A page may go away between reading the
// record and reading the page (the session moved on and was the page's
// last reference); the export then starts again from the new record, at
// most three times, then answers ABORTED.
//
// Import checks everything before it writes, then writes the record and the
// pages the store lacks in one store mutation (one RocksDB batch), then
// lists the session. Imports are serialised by one mutex, so two imports of
// one id cannot both pass the ALREADY_EXISTS check.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "cache/migration_stream.h"
#include "cache/page_codec.h"
#include "service/import_checks.h"
#include "service/record_convert.h"
#include "service/auth/principal.h"
#include "service/session_manager.h"

namespace kvs {
namespace {

absl::Mutex import_mu;

}  // namespace

absl::StatusOr<ExportedStream> SessionManager::Export(const ExportRequest& request) const {
  absl::Status last;
  for (int attempt = 0; attempt < 3; ++attempt) {
    MigrationStreamWriter writer;
    SessionRecord session;
    if (request.checkpoint) {
      absl::StatusOr<CheckpointRecord> c = store_->GetCheckpoint(request.id);
      if (absl::IsNotFound(c.status())) {
        return absl::NotFoundError(absl::StrCat("no checkpoint '", request.id, "'"));
      }
      if (!c.ok()) return c.status();
      session = c->session();
      writer.SetCheckpoint(*c);
    } else {
      absl::StatusOr<SessionRecord> r = store_->GetSession(request.id);
      if (absl::IsNotFound(r.status())) {
        return absl::NotFoundError(absl::StrCat("no session '", request.id, "'"));
      }
      if (!r.ok()) return r.status();
      session = *std::move(r);
      writer.SetSession(session);
    }
    ExportedStream out;
    absl::StatusOr<KvGeometry> g = FromGeometryRecord(session.geometry());
    if (!g.ok()) return absl::DataLossError(std::string(g.status().message()));
    bool moved_on = false;
    for (int i = 0; i < session.page_hashes_size() && !moved_on; ++i) {
      const PageHash hash = *PageHash::FromBytes(session.page_hashes(i));
      out.page_hashes.push_back(hash);
      if (request.omit.contains(hash)) {
        ++out.pages_omitted;
        continue;
      }
      absl::StatusOr<std::string> page = store_->GetPage(hash);
      if (absl::IsNotFound(page.status())) {
        moved_on = true;
        last = absl::AbortedError(absl::StrCat(
            request.checkpoint ? "checkpoint '" : "session '", request.id,
            "' changed while it was exported three times; try again"));
        break;
      }
      if (!page.ok()) return page.status();
      absl::StatusOr<EncodedPageInfo> info = CheckEncodedPage(*page);
      const int n_tokens = PageTokensAt(*g, session.kv_length(), i);
      if (!info.ok() || !(info->geometry == *g) || info->n_tokens != n_tokens) {
        return absl::DataLossError(absl::StrCat(
            "page ", hash.hex(), " of '", request.id, "' is damaged",
            info.ok() ? "" : absl::StrCat(": ", std::string(info.status().message()))));
      }
      if (static_cast<int64_t>(writer.size() + page->size()) > request.max_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "'", request.id, "' exports to more than the migration limit of ",
            request.max_bytes >> 20, " MiB"));
      }
      if (request.reserve) {
        if (absl::Status st = request.reserve(static_cast<int64_t>(writer.size() + page->size())); !st.ok()) {
          return st;
        }
      }
      writer.AddPage(hash, *page);
      ++out.pages_sent;
    }
    if (moved_on) continue;
    out.bytes = std::move(writer).Finish();
    return out;
  }
  return last;
}

absl::StatusOr<ImportResult> SessionManager::Import(const MigrationContents& contents) {
  const SessionRecord& record = contents.record();
  // Another model's or geometry's record would be listed but unusable.
  if (std::shared_ptr<Session> probe = SessionFromRecord(record, context_); !probe->foreign.ok()) {
    return probe->foreign;
  }
  // Token ids, KV length, sampling defaults, context state (import_checks.h).
  if (absl::Status st = CheckImportedSession(record, model_.config().vocab_size, model_.config().context_length,
                                             context_.geometry.page_tokens);
      !st.ok()) {
    return st;
  }
  auto encode = [&](int page_index) -> absl::StatusOr<std::string> {
    const PageHash hash = *PageHash::FromBytes(record.page_hashes(page_index));
    auto it = contents.pages.find(hash);
    if (it == contents.pages.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "page ", hash.hex(), " is neither in the stream nor held by this server "
          "(export again without omitting it)"));
    }
    return it->second;
  };
  absl::MutexLock lock(&import_mu);
  ImportResult result;
  WriteStats stats;
  if (contents.checkpoint) {
    const CheckpointRecord& c = *contents.checkpoint;
    if (registry_.HasCheckpoint(c.id())) {
      return absl::AlreadyExistsError(absl::StrCat("checkpoint '", c.id(), "' already exists here"));
    }
    if (absl::Status st = CheckCheckpointRoom(CheckpointOwner(c)); !st.ok()) return st;
    if (absl::Status s = store_->PutCheckpoint(c, encode, &stats); !s.ok()) return s;
    registry_.AddCheckpoint(c);
    result.checkpoint_id = c.id();
  } else {
    if (registry_.Get(record.id(), false).ok()) {
      return absl::AlreadyExistsError(absl::StrCat("session '", record.id(), "' already exists here"));
    }
    const std::string owner = RecordOwner(record);
    if (absl::Status s = registry_.CheckRoom(1, &owner); !s.ok()) return s;
    if (absl::Status s = store_->PutSession(record, encode, &stats); !s.ok()) return s;
    // The limits again, with the add (a Create may have taken the slot).
    const std::shared_ptr<Session> imported = SessionFromRecord(record, context_);
    // An import is a use (session_expiry.h): its idle time starts here, not
    // at its last change on the source.
    imported->last_used_us = absl::ToUnixMicros(absl::Now());
    if (absl::Status added = registry_.Add({&imported, 1}); !added.ok()) {
      store_->DeleteSession(record.id()).IgnoreError();
      return added;
    }
  }
  result.session_id = record.id();
  result.pages_written = static_cast<int>(stats.pages_written);
  result.pages_reused = static_cast<int>(stats.pages_reused);
  result.bytes_written = stats.bytes_written;
  return result;
}

}  // namespace kvs
