// The restore table of kvs-bench-service (issue 11): a long session is
// created once in its own store; then, `repeats` times each, kvsessiond is
// restarted and the session restored (RestoreSession over gRPC) with the
// store's files in the page cache ("warm") and dropped from it ("cold",
// posix_fadvise DONTNEED before the restart). The disk's cold sequential
// read bandwidth is measured in the same run, on a file of the store's size
// in the same directory. Prints tokens, MB, warm/cold medians, the targets
// (warm <= 60 ms, cold <= 1.3 x bytes / bandwidth) and pass/miss, for a
// server whose KV pool is mapped on demand (--kv-warm-tokens 0), one with
// the default (4,096 tokens of pages kept resident ahead of use) and one
// started with --kv-prefault (the whole pool resident at startup).
#ifndef KVSESSION_BENCH_RESTORE_TABLE_H_
#define KVSESSION_BENCH_RESTORE_TABLE_H_

#include <string>
#include <vector>

namespace kvs {

struct RestoreTableOptions {
  std::string model;
  std::string dir;                     // scratch directory (store, bandwidth file)
  int tokens = 2000;                    // the long session's length (token ids 100..999)
  std::vector<std::string> server_flags;
  int repeats = 5;
};

// Returns 0, or 1 if the server or a call failed (message on stderr).
int PrintRestoreTable(const RestoreTableOptions& options);

}  // namespace kvs

#endif  // KVSESSION_BENCH_RESTORE_TABLE_H_
