// LoadController: one run of the load tool. Starts the real kvsessiond on a
// loopback port (tests/server_process.h), runs `clients` LoadWorkers for
// `duration`, samples the server's VmRSS once a second, kills the server
// with SIGKILL at `kills` random moments and restarts it on the same data
// directory, and after every restart checks the server against the
// SessionLedger (every acknowledged call must have survived). At the end it
// kills and checks once more (so calls after the last kill are checked too),
// then stops the server with SIGTERM, which must exit 0. With
// drop_page_cache_every it also drops the data directory from the page
// cache as it goes, so restores read from the disk.
//
// With `tenants` the server gets an --auth-keys file and the clients are
// spread over the tenants (client i is tenant i mod N), one ledger each;
// with `tls` every call goes over TLS (load_identities.h). After every
// restart each tenant's ledger is checked with that tenant's key, and the
// isolation too: none of a tenant's surviving sessions may be readable
// with the next tenant's key, and no tenant may list another's checkpoint.
// With `tenant_quotas`, tenant load-t0 must hold no more than each limit
// at each check (CheckQuota).
//
// Run() may be called once, from one thread; it owns the server process
// and the worker threads.
#ifndef KVSESSION_TOOLS_LOAD_LOAD_CONTROLLER_H_
#define KVSESSION_TOOLS_LOAD_LOAD_CONTROLLER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tools/load/load_identities.h"
#include "tools/load/load_report.h"
#include "tools/load/load_stats.h"
#include "tools/load/server_link.h"
#include "tools/load/session_ledger.h"

namespace kvs {
class KvSessionClient;
class ServerProcess;
}  // namespace kvs

namespace kvs::load {

struct LoadOptions {
  std::string model;
  std::string work_dir;  // data directory and server logs go here
  int clients = 64;
  std::chrono::milliseconds duration{30000};
  int kills = 3;
  uint64_t seed = 1;
  int target_sessions = 0;  // 0: as many as clients
  double cancel_fraction = 0.05;
  double chat_fraction = 0;  // of Appends sent as a chat message (load_worker.h)
  bool strict_busy = false;
  int server_threads = 2;
  std::vector<std::string> server_args;  // more kvsessiond flags, after --threads
  std::set<std::string> skipped_ops;  // see OperationNames() in load_worker.h
  // Every period (0: never), and before each restart, the data directory's
  // files are dropped from the page cache (page_cache_dropper.h), so the
  // server's restores read cold.
  std::chrono::milliseconds drop_page_cache_every{0};
  int tenants = 0;   // 0: no --auth-keys, every call the default tenant's
  bool tls = false;  // serve and call over TLS with test-time certificates
  std::vector<LoadQuota> tenant_quotas;  // tenant load-t0's (needs tenants >= 2)
};

class LoadController {
 public:
  explicit LoadController(LoadOptions options);
  ~LoadController();

  // Runs to the end; the report says what happened (report.passed()).
  LoadReport Run();

 private:
  enum class Cycle { kKill, kUnexpectedExit, kFinal };

  bool StartServer();
  // Takes the server down (killing it unless it exited by itself), restarts
  // it and checks it against the ledger. False if it could not restart.
  bool RestartAndCheck(Cycle why);
  void Check();
  // Checks tenant `t`'s ledger against what its own key reads; the
  // isolation checks read `t`'s surviving sessions with `next`'s key.
  void CheckTenant(size_t t, KvSessionClient& own, KvSessionClient& next);
  // With quotas on tenant `t`: what it holds is within each limit, each
  // one over it a quota breach. max_sessions: the sessions its key lists;
  // max_checkpoints: `checkpoints` as CheckTenant listed them;
  // max_store_bytes and max_kv_bytes: the usage GetServerInfo shows its key
  // (after a restart, the store bytes recounted from the store).
  // max_generates is not checked.
  void CheckQuota(size_t t, KvSessionClient& own, size_t checkpoints);
  // Records the server's sessions, KV cache and store figures in the report.
  void DescribeServer();
  void SampleRss();
  // Drops data_dir_ from the page cache; returns how long that took.
  std::chrono::duration<double, std::milli> DropDataFromPageCache();
  double SecondsSinceStart() const;

  LoadOptions options_;
  LoadReport report_;
  std::mt19937_64 rng_;
  std::unique_ptr<ServerProcess> server_;
  int server_run_ = 0;
  std::string data_dir_;
  ServerLink link_;
  LoadIdentities identities_;
  std::vector<std::unique_ptr<SessionLedger>> ledgers_;  // one per tenant
  LoadStats stats_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace kvs::load

#endif  // KVSESSION_TOOLS_LOAD_LOAD_CONTROLLER_H_
