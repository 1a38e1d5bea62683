// kvs-bench-service --table startup: how long a restarted kvsessiond takes
// to serve, by the size of its store. Sessions of `tokens` distinct tokens
// each are created in one store until it holds each count of `sessions`
// (ascending; creation is not timed); at each count the server is stopped
// (SIGTERM) and started again `repeats` times with the store's files in the
// page cache ("warm") and dropped from it ("cold"), and the time from the
// start of the process until a GetServerInfo answers, and says every
// session was loaded, is taken. Start-up reads every record (verifying its
// page-hash chain) and lists the page files (docs/storage-format.md,
// sections 7-8), so this is what an operator sizes a start-up probe by.
// Prints sessions, pages and bytes stored, and warm and cold medians.
//
// With more than one kvsessiond in `servers` (two builds, say) each
// restart is made by each of them in turn, on the same store, so the
// builds are compared side by side in one run: a column pair per build and
// each later build's ratio to the first. The store is filled by the first.
// `pause_s` waits before every restart: on a VM whose host takes freed
// memory back only after some seconds, a start right after a stop finds
// the memory still backed and measures less than a cold start's.
#ifndef KVSESSION_BENCH_STARTUP_TABLE_H_
#define KVSESSION_BENCH_STARTUP_TABLE_H_

#include <string>
#include <vector>

namespace kvs {

struct StartupTableOptions {
  std::string model;
  std::string dir;                          // scratch directory (the store)
  std::vector<int> sessions = {0, 250, 1000};  // store sizes measured, ascending
  int tokens = 512;                         // tokens per session (distinct per session)
  int clients = 2;                          // concurrent CreateSession calls while filling
  std::vector<std::string> server_flags;
  std::vector<std::string> servers;         // kvsessiond binaries; empty: this build's
  int pause_s = 0;                          // seconds before every restart
  int repeats = 3;
};

// Returns 0, or 1 if the server or a call failed (message on stderr).
int PrintStartupTable(const StartupTableOptions& options);

}  // namespace kvs

#endif  // KVSESSION_BENCH_STARTUP_TABLE_H_
