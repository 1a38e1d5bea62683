// SessionExpiry: deletes the sessions nobody has used for a while
// (kvsessiond --delete-idle-sessions-after), so a store does not keep every
// conversation ever started: the ones a client abandoned, and the ones
// whose CreateSession or Fork the client never heard back from.
//
// What counts. A session's idle time runs from the end of the last call
// that held it: Generate, Append, Truncate, Fork, Snapshot, a restore, or
// the CreateSession, Fork, Restore or ImportSession that made it
// (SessionRegistry's Acquire/AcquireShared and their release). Reading it
// (GetSession, ListSessions, Tokenize, ExportSession) does not count. The
// clock is kept in RAM: after a restart, a session not used since counts
// from its record's update time, the last change the store saw (session.h
// last_used_us), so uses that wrote nothing (a Restore by id, a call
// refused after taking the session, an import) are forgotten.
//
// What an expiry does: exactly what DeleteSession does (the record leaves
// the store in one atomic write, pages no other record references go, the
// KV leaves RAM), for a session nobody holds and nobody has used since
// the cutoff, both checked as it is taken (SessionManager::
// DeleteIfUnusedSince): a call that takes the session first wins, and the
// session stays; a call that comes while it is being deleted waits for the
// delete, then gets NOT_FOUND (SessionRegistry::TakeIfUnusedSince). What it
// does not touch: checkpoints (they stay until DeleteCheckpoint; a
// checkpoint of an expired session restores as before), sessions of another
// model or KV geometry (this server cannot judge them; they stay for the
// server that can), and a session whose delete the store refuses (it stays
// and is tried again at the next sweep).
//
// When: a sweep every SweepInterval(ttl) on a thread of its own (never an
// io or engine thread), so a session goes at most that long after its TTL.
// Wall-clock time (absl::Now), as record times are.
//
// Thread safety: Sweep may run on any thread, concurrently with every
// SessionManager call. The sweeping thread starts in Start() and stops in
// Stop() or the destructor (an expiry under way finishes first); Start and
// Stop are called from one thread.
#ifndef KVSESSION_SERVICE_SESSION_EXPIRY_H_
#define KVSESSION_SERVICE_SESSION_EXPIRY_H_

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "service/session_manager.h"

namespace kvs {

class SessionExpiry {
 public:
  // Sessions unused for `idle_ttl` (> 0) expire. `sessions` outlives this.
  SessionExpiry(SessionManager* sessions, absl::Duration idle_ttl);
  ~SessionExpiry();
  SessionExpiry(const SessionExpiry&) = delete;
  SessionExpiry& operator=(const SessionExpiry&) = delete;

  // Starts sweeping every SweepInterval(idle_ttl). Call once.
  void Start();
  // Stops sweeping: an expiry under way finishes, no other starts. Sweep
  // does nothing after it. Idempotent; the destructor calls it.
  void Stop();

  // Expires, as of `now`, every session unused since before now - idle_ttl;
  // returns how many went. Store errors leave their sessions for the next
  // sweep.
  int Sweep(absl::Time now);

  // idle_ttl / 8, within [100 ms, 60 s].
  static absl::Duration SweepInterval(absl::Duration idle_ttl);

  // Sessions expired so far (kvsession_sessions_expired_total).
  int64_t expired_count() const { return expired_count_.load(std::memory_order_relaxed); }

 private:
  void Run();

  SessionManager* const sessions_;
  const absl::Duration idle_ttl_;
  std::atomic<int64_t> expired_count_{0};
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_SESSION_EXPIRY_H_
