// SessionLedger: what the server acknowledged to the load tool, per session
// and per checkpoint, and the check of a restarted server against it.
//
// Token ids are tracked by position: an acknowledged call that left a session
// at length L having added tokens t (Append, Generate) fixes positions
// [L - |t|, L). Positions no acknowledged call fixed (BOS, tokens of a call
// that was cancelled or in flight at a kill) are unknown (-1). A session is
// "uncertain" while an unacknowledged call may have added tokens to it; only
// then may the server hold more tokens than acknowledged.
//
// A Truncate to L forgets positions [L, ...): later calls write them anew.
// So that acknowledgements reach the ledger in the server's order, a Truncate
// runs alone on its session: every other call of the tool on a session runs
// inside a shared section (EnterSession .. LeaveSession, acknowledgement
// included), a Truncate in the exclusive one (BeginTruncate .. its end).
//
// Verify() checks every acknowledged call since the previous Verify():
//   - a session's Create / Fork branch / Restore, Append and Generate survived
//     iff the session exists, is at least as long as the call left it, and
//     every known token up to there matches;
//   - a Truncate survived iff, besides that, the session is no longer than
//     acknowledged (unless an unacknowledged call came after it);
//   - a Delete survived iff the session is NOT_FOUND;
//   - a Snapshot survived iff its checkpoint is listed with its length, a
//     DeleteCheckpoint iff it is not listed.
// A session longer than acknowledged without an unacknowledged call on it is
// a "phantom" (counted apart). Verify() then takes the server's state as the
// new baseline. Calls on the ledger must not run during Verify().
//
// Thread-safe (one mutex); it also tracks which calls of the tool are running
// on each session, for the busy classification (error_classifier.h).
#ifndef KVSESSION_TOOLS_LOAD_SESSION_LEDGER_H_
#define KVSESSION_TOOLS_LOAD_SESSION_LEDGER_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace kvs::load {

inline constexpr int32_t kUnknownToken = -1;

// The server's state as read after a restart.
struct ServerView {
  // Token ids per session asked about; nullopt = NOT_FOUND.
  std::map<std::string, std::optional<std::vector<int32_t>>> sessions;
  // Every checkpoint the server lists, with its length.
  std::map<std::string, int32_t> checkpoints;
};

struct VerifyResult {
  int64_t checked = 0;  // acknowledged calls checked
  int64_t lost = 0;     // of those, not found as acknowledged
  int64_t phantom = 0;  // sessions longer than acknowledged with no call in flight
  std::vector<std::string> problems;  // the first few, for the report
};

class SessionLedger {
 public:
  // A call of the tool running on one session.
  struct CallTicket {
    std::string session_id;
    uint64_t seq = 0;
    bool overlapped_at_start = false;
  };
  // What happened on the session while the call ran.
  struct CallEnd {
    bool overlapped = false;      // another call of ours ran on it meanwhile
    bool recent_cancel = false;   // we cancelled a Generate on it within 1 s
    bool deleted = false;         // deleted or being deleted by us
  };

  // ---- Picking targets (only live sessions / checkpoints are picked).
  std::optional<std::string> PickSession(std::mt19937_64& rng);
  std::optional<std::string> PickCheckpoint(std::mt19937_64& rng);
  size_t live_sessions() const;
  size_t live_checkpoints() const;
  // Tokens the session is known to hold (its acknowledged length); 0 if unknown.
  int32_t AcknowledgedLength(const std::string& id) const;
  // Known token ids of positions [0, length) (kUnknownToken where unknown).
  std::vector<int32_t> KnownPrefix(const std::string& id, int32_t length) const;
  std::vector<int32_t> CheckpointTokens(const std::string& checkpoint_id) const;

  // ---- Calls in flight on a session.
  CallTicket BeginCall(const std::string& id);
  CallEnd EndCall(const CallTicket& ticket);

  // ---- Acknowledged calls. An error return means the acknowledgement
  // contradicts an earlier one (WRONG_RESULT); the ledger is then unchanged
  // except that the session becomes uncertain.
  // A new session (Create, Fork branch, Restore) holding `tokens`.
  void AckNewSession(const std::string& id, std::vector<int32_t> tokens);
  // Append / Generate: the session now has `length_after` tokens, the last
  // of which are `added`.
  absl::Status AckAppend(const std::string& id, int32_t length_after,
                         std::span<const int32_t> added);
  // An unacknowledged call may have added tokens (in flight at a kill,
  // failed, or cancelled by us when `cancelled`).
  void MarkUncertain(const std::string& id, bool cancelled = false);

  // Delete: Begin takes the session out of the pool (false if it is not
  // live); then exactly one of Ack / Rejected (nothing changed: back to the
  // pool) / Unknown (may or may not have happened).
  bool BeginDelete(const std::string& id);
  void AckDelete(const std::string& id);
  void DeleteRejected(const std::string& id);
  void DeleteUnknown(const std::string& id);

  // Sections (see the top): EnterSession is false while a Truncate runs on
  // the session (the caller then leaves it alone); BeginTruncate is false
  // unless the session is live with no section and no Truncate on it. A
  // Truncate then ends in exactly one of Ack (the session now holds exactly
  // its first `length` tokens), Rejected (nothing changed) and Unknown (it
  // may or may not have happened: the first `length` tokens are what is
  // known, and the server may hold more).
  bool EnterSession(const std::string& id);
  void LeaveSession(const std::string& id);
  bool BeginTruncate(const std::string& id);
  void AckTruncate(const std::string& id, int32_t length);
  void TruncateRejected(const std::string& id);
  void TruncateUnknown(const std::string& id, int32_t length);

  void AckSnapshot(const std::string& checkpoint_id, int32_t length, std::vector<int32_t> tokens);
  bool BeginDeleteCheckpoint(const std::string& id);
  void AckDeleteCheckpoint(const std::string& id);
  void DeleteCheckpointRejected(const std::string& id);
  void DeleteCheckpointUnknown(const std::string& id);
  // True if the session was deleted or is being deleted by us.
  bool SessionDeleted(const std::string& id) const;
  // True if the checkpoint was deleted or is being deleted by us.
  bool CheckpointDeleted(const std::string& id) const;
  // True if a call of ours ever created session or checkpoint `id` (a
  // tenant's ledger: the ids another tenant must never see).
  bool Tracks(const std::string& id) const;

  // ---- Checking a restarted server.
  std::vector<std::string> SessionsToCheck() const;
  VerifyResult Verify(const ServerView& server);

 private:
  enum class Life { kLive, kDeleting, kDeleted, kDeleteUnknown };
  struct Range {
    int32_t begin;
    int32_t end;
  };
  struct TrackedSession {
    std::vector<int32_t> tokens;  // size = acknowledged length
    bool uncertain = false;
    Life life = Life::kLive;
    std::vector<Range> unchecked;  // acknowledged calls since the last Verify
    int in_flight = 0;
    uint64_t call_seq = 0;
    int sections = 0;         // shared sections open on it
    bool truncating = false;  // a Truncate holds it alone
    bool truncated = false;   // an acknowledged Truncate since the last Verify
    std::chrono::steady_clock::time_point last_cancel{};
  };
  struct TrackedCheckpoint {
    int32_t length = 0;
    std::vector<int32_t> tokens;
    Life life = Life::kLive;
    bool unchecked = true;
  };

  void AddLive(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveLive(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddLiveCheckpoint(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveLiveCheckpoint(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CutTo(TrackedSession& s, int32_t length) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void VerifySession(const std::string& id, TrackedSession& s,
                     const std::optional<std::vector<int32_t>>& server, VerifyResult& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::unordered_map<std::string, TrackedSession> sessions_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> live_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, size_t> live_index_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, TrackedCheckpoint> checkpoints_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> live_checkpoints_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, size_t> live_checkpoint_index_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvs::load

#endif  // KVSESSION_TOOLS_LOAD_SESSION_LEDGER_H_
