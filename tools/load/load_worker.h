// LoadWorker: one simulated client of the load tool. It loops until told to
// stop, each time picking an operation at random (Create, Append, Generate,
// Fork, Snapshot, Restore, GetSession, ListSessions, DeleteSession,
// DeleteCheckpoint, Truncate) on sessions and checkpoints shared with every other
// worker of its tenant through that tenant's SessionLedger, records what the
// server acknowledged in the ledger and what it observed in LoadStats
// (errors classified by error_classifier.h).
//
// With tenants (load_identities.h) a worker calls as one tenant, with its
// key, and also checks the isolation between tenants: a GetSession of
// another tenant's session must be NOT_FOUND ("foreign-get"), and
// ListSessions must list no id another tenant's ledger tracks; either
// breach is a WRONG_RESULT.
//
// Sessions stay below half the context (longer ones get deleted), the pool
// holds about `target_sessions` sessions. A worker owns its own gRPC channel
// (remade when the server restarts). Each worker is used by one thread;
// the ledger, stats and link it shares are thread-safe.
#ifndef KVSESSION_TOOLS_LOAD_LOAD_WORKER_H_
#define KVSESSION_TOOLS_LOAD_LOAD_WORKER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "client/kvsession_client.h"
#include "tools/load/load_identities.h"
#include "tools/load/load_stats.h"
#include "tools/load/server_link.h"
#include "tools/load/session_ledger.h"

namespace kvs::load {

// Names of the operations a worker picks from ("create", "append",
// "generate", "fork", "snapshot", "restore", "restore-session", "get",
// "list", "delete", "delete-checkpoint", "truncate", "foreign-get").
std::vector<std::string> OperationNames();

// The sessions a worker keeps its tenant near: `target_sessions`, or a
// max_sessions quota's limit (among `quotas`) when that is lower, so that a tenant with the
// quota runs the whole mix near its limit (its Forks and Restores refused
// there) instead of asking, call after call, for Creates the quota refuses.
// Below half of it every operation is a Create; below it a Create may be
// picked (at or above it a Create turns to a Generate); at twice it
// Creates, Forks and Restores turn to Deletes, and Snapshots turn to
// DeleteCheckpoints at twice it in checkpoints.
size_t SessionTarget(int target_sessions, const std::vector<LoadQuota>& quotas);

struct WorkloadOptions {
  int target_sessions = 16;
  int32_t max_session_tokens = 64;  // delete a session once it is longer
  int32_t vocab_size = 0;
  int32_t bos_token_id = -1;
  double cancel_fraction = 0.05;  // of Generates cancelled after the first token
  // Of Appends sent as one user chat message of random words instead of
  // token ids, and of Creates as a system and a user message (the server
  // must have a chat template). Each is counted by Tokenize first: the
  // session cap counts its rendered tokens (markup included; a Create
  // longer than the cap goes as token ids instead, an Append that would
  // pass it deletes the session), and the ledger acknowledges those tokens
  // (an Append's by length only when another call of ours ran on the
  // session meanwhile). A later call that adds more than its input (a
  // generation prompt, an end-of-turn) acknowledges only what it generated.
  double chat_fraction = 0;
  bool strict_busy = false;
  std::set<std::string> skipped_ops;  // never run these (not "create")
};

class LoadWorker {
 public:
  // `caller`: the tenant and security of every call; `ledger`: that
  // tenant's; `other_tenants`: the other tenants' ledgers (none without
  // tenants), for the isolation checks. All outlive the worker.
  LoadWorker(uint64_t seed, const WorkloadOptions& options, const Caller& caller, ServerLink& link,
             SessionLedger& ledger, std::vector<SessionLedger*> other_tenants, LoadStats& stats);

  // Runs operations until `stop` is set.
  void Run(const std::atomic<bool>& stop);

 private:
  using Clock = std::chrono::steady_clock;

  void RunOne();
  void Create();
  void Append(const std::string& id);
  void Generate(const std::string& id);
  void Fork(const std::string& id);
  void Snapshot(const std::string& id);
  void Restore();
  void RestoreSession(const std::string& id);
  void Get(const std::string& id);
  void List();
  void Delete(const std::string& id);
  void DeleteCheckpoint();
  // Cuts the session to a random shorter length, alone on it (session_ledger.h).
  void Truncate(const std::string& id);
  // GetSession of another tenant's session: NOT_FOUND, or a WRONG_RESULT.
  void ForeignGet();
  // The id of `ids` another tenant's ledger tracks, if any.
  std::optional<std::string> ForeignId(const std::vector<std::string>& ids) const;

  std::vector<int32_t> RandomTokens(int min_count, int max_count);
  // A few random words (a chat message's content).
  std::string RandomWords();
  double MillisSince(Clock::time_point start) const;
  // The ids `request` would add (Tokenize), or nullopt after recording the
  // failure; on failure, also ends `ticket` (when given: a call on the
  // session that the count begins).
  std::optional<std::vector<int32_t>> TokenizeInput(const kvsession::v1::TokenizeRequest& request,
                                                    SessionLedger::CallTicket* ticket = nullptr);
  // Classifies and records a failed call; returns the classification.
  Classification Fail(const std::string& method, const absl::Status& status, CallContext context);
  // Failure of a call that may have changed session `id`: records it and,
  // unless nothing can have happened (busy, deleted), marks it uncertain.
  void FailMutation(const std::string& method, const std::string& id, const absl::Status& status,
                    const SessionLedger::CallEnd& end, bool mid_stream = false);

  std::mt19937_64 rng_;
  WorkloadOptions options_;
  const Caller& caller_;
  ServerLink& link_;
  SessionLedger& ledger_;
  std::vector<SessionLedger*> other_tenants_;
  LoadStats& stats_;
  std::vector<int> weights_;  // per operation, 0 when skipped
  size_t session_target_;     // SessionTarget() of the options and the caller's quota
  // Set by a max_store_bytes refusal: the next operation deletes a session
  // or a checkpoint, as a client at its storage quota frees some before it
  // writes again (instead of a run of writes the quota refuses).
  bool free_store_next_ = false;
  uint64_t epoch_ = 0;  // of the current operation
  uint64_t client_epoch_ = 0;
  std::unique_ptr<KvSessionClient> client_;
};

}  // namespace kvs::load

#endif  // KVSESSION_TOOLS_LOAD_LOAD_WORKER_H_
