// What SessionManager's migration operations (Export, Import; defined in
// session_migration.cc) take and give. The stream itself is
// cache/migration_stream.h.
#ifndef KVSESSION_SERVICE_SESSION_MIGRATION_H_
#define KVSESSION_SERVICE_SESSION_MIGRATION_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "cache/migration_stream.h"
#include "cache/page_hash.h"

namespace kvs {

// The largest stream ExportSession writes and ImportSession reads (held in
// RAM while it is checked: import validates the whole stream before it
// writes anything).
inline constexpr int64_t kMaxMigrationBytes = int64_t{1} << 30;

struct ExportRequest {
  std::string id;           // a session id, or a checkpoint id when `checkpoint`
  bool checkpoint = false;
  absl::flat_hash_set<PageHash> omit;  // pages the receiver holds
  int64_t max_bytes = kMaxMigrationBytes;
  // Called, when set, before each page joins the stream being built, with
  // the stream's bytes in all once it has (the record and the pages so
  // far, without their framing: the caller reserves the whole stream once
  // it is built); an error ends the export with it (the caller's memory
  // lease: MigrationMemory).
  std::function<absl::Status(int64_t bytes)> reserve;
};

struct ExportedStream {
  std::string bytes;                     // the whole stream
  std::vector<PageHash> page_hashes;     // every page of the record
  int pages_sent = 0;
  int pages_omitted = 0;
};

struct ImportResult {
  std::string session_id;
  std::string checkpoint_id;  // set for a checkpoint
  int pages_written = 0;
  int pages_reused = 0;
  int64_t bytes_written = 0;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_SESSION_MIGRATION_H_
