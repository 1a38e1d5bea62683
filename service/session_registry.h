// SessionRegistry: the server's index of sessions and checkpoints, and the
// busy protocol that gives one holder at a time a session's KV and tokens.
//
// Access protocol: a session has either one exclusive holder or any number
// of readers, never both.
//   Acquire()        exclusive (Generate, Append, Delete): the holder owns
//                    the session's KV, page hashes, random generator and
//                    the right to append tokens (session.h); Release() is
//                    the one way back.
//   AcquireShared()  a reader (Fork, Snapshot): reads tokens and KV, and
//                    writes the session's record under its persist_mu;
//                    ReleaseShared() ends it.
// A call that finds the session taken waits, within its deadline, when the
// wait is short by nature: readers finishing, or an exclusive holder whose
// job was cancelled (it ends within one engine step). A holder whose job
// is not cancelled gets kCancelGrace to turn out cancelled (a client's
// cancel may reach the server after its next call). Otherwise, and when the
// deadline passes, the call gets ABORTED (retryable), naming what holds
// the session and for how long.
//
// What it does not do: no disk I/O and no KV loading (SessionManager), no
// page hashing (SessionKv).
//
// Thread safety: every method is thread-safe; all take the registry's one
// mutex, never while calling out, except into the page pool (its reference
// counts, NoteRoomMayBeMade), which never calls back. UnderLock() runs a caller's function on
// registry-guarded session fields (see session.h) with that mutex held.
#ifndef KVSESSION_SERVICE_SESSION_REGISTRY_H_
#define KVSESSION_SERVICE_SESSION_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cache/page_pool.h"
#include "cache/session_record.pb.h"
#include "model/sampler.h"
#include "service/job_handle.h"
#include "service/context_policy.h"
#include "service/session.h"
#include "service/tenant_store_bytes.h"

namespace kvs {

// A copy of a session's metadata, safe to read without locks.
struct SessionInfo {
  std::string id;
  int length = 0;
  SamplingParams sampling;
  std::map<std::string, std::string> labels;
  int64_t create_time_us = 0;
  int64_t update_time_us = 0;
  int64_t last_used_us = 0;  // session.h last_used_us
  bool busy = false;
  bool resident = false;
  std::string parent_session_id;
  std::string checkpoint_id;
  std::string owner;  // tenant (session.h)
  int kv_pages = 0;
  int kv_pages_shared = 0;
  std::vector<int32_t> tokens;  // only when asked for
  ChatState chat;
  ContextPolicy context_policy = ContextPolicy::kError;
  int keep_tokens = 0;
};

// The tenant a checkpoint belongs to: its session's (the default tenant
// for records without an owner).
std::string CheckpointOwner(const CheckpointRecord& checkpoint);

class SessionRegistry {
 public:
  static constexpr absl::Duration kCancelGrace = absl::Milliseconds(100);

  // `pool` is read for page sharing in SessionInfo and told when a session
  // becomes evictable (NoteIfEvictable); `max_sessions` bounds the number
  // of sessions held.
  SessionRegistry(PagePool* pool, int max_sessions)
      : pool_(pool), max_sessions_(max_sessions), stored_(pool->geometry()) {}

  // Adds sessions (new ids). RESOURCE_EXHAUSTED at the session limit; on
  // error nothing is added.
  absl::Status Add(std::span<const std::shared_ptr<Session>> sessions);
  // Adds a session found in the store (no limit check).
  void AddLoaded(std::shared_ptr<Session> session);
  // RESOURCE_EXHAUSTED unless `more` sessions fit under the limit now
  // (and, when `owner` is given, under that tenant's max_sessions quota).
  absl::Status CheckRoom(int more, const std::string* owner = nullptr) const;
  // The tenant's max_sessions quota (0 = unlimited; tenant_quotas.h): Add
  // refuses, with QuotaExceeded and adding nothing, sessions that would
  // take an owner past it. Set once, before the registry is shared.
  void SetTenantSessionLimit(std::function<int64_t(const std::string&)> limit) {
    tenant_limit_ = std::move(limit);
  }
  // Sessions (resident or not) owned by `owner`.
  int owned_count(const std::string& owner) const;
  // The tenant's max_checkpoints quota (0 = unlimited), as
  // SetTenantSessionLimit. Set once, before the registry is shared.
  void SetTenantCheckpointLimit(std::function<int64_t(const std::string&)> limit) {
    tenant_checkpoint_limit_ = std::move(limit);
  }
  // Checkpoints owned by `owner` (CheckpointOwner).
  int owned_checkpoint_count(const std::string& owner) const;
  // OK if one more checkpoint of `owner` fits: RESOURCE_EXHAUSTED when the
  // server holds `server_limit` (--max-checkpoints) already, QuotaExceeded
  // at the owner's max_checkpoints. A check, not a reservation: checkpoints
  // written at once may pass it together.
  absl::Status CheckpointRoom(const std::string& owner, int server_limit) const;
  // The bytes the store holds for `owner`'s records and their pages
  // (TenantStoreBytes), kept as records are written and removed.
  int64_t stored_bytes(const std::string& owner) const;
  // Marks `session` persisted as `record` (record_convert.h MarkPersisted)
  // and counts the record's bytes and pages for its owner in place of the
  // ones before. Every write of an indexed session's record ends here.
  void MarkPersisted(const SessionRecord& record, Session& session);
  // Runs on_session(const Session&) for every session `owner` owns, then
  // on_checkpoint(const CheckpointRecord&) for every checkpoint it owns,
  // with the registry's mutex held (see session.h for the fields it
  // guards; the callbacks must not call the registry). The cost is the
  // owner's sessions and checkpoints, not the whole registry's.
  template <typename F, typename G>
  void ForEachOwnedBy(const std::string& owner, F&& on_session, G&& on_checkpoint) const {
    absl::MutexLock lock(&mu_);
    if (auto it = owned_.find(owner); it != owned_.end()) {
      for (const Session* s : it->second) on_session(*s);
    }
    if (auto it = owned_checkpoints_.find(owner); it != owned_checkpoints_.end()) {
      for (const std::string& id : it->second) {
        if (auto c = checkpoints_.find(id); c != checkpoints_.end()) on_checkpoint(c->second);
      }
    }
  }
  // Runs f(const Session&) on session `id` with the registry's mutex held
  // (the same rules as ForEach); false, without calling f, when there is
  // no such session.
  template <typename F>
  bool WithSession(const std::string& id, F&& f) const {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return false;
    f(*it->second);
    return true;
  }
  void Remove(const std::string& id);

  // Takes the session exclusively for `what` ("Generate", ...) and returns
  // it. NOT_FOUND, FAILED_PRECONDITION (made by another model), ABORTED
  // (held by another call; see above). On error nothing changes.
  absl::StatusOr<std::shared_ptr<Session>> Acquire(const std::string& id, const char* what,
                                                   absl::Time deadline);
  // The one path from exclusive back to idle. `described`, if not null,
  // receives the session as it is released (before any other call can
  // take it).
  void Release(Session& session, SessionInfo* described = nullptr);
  // Records the exclusive holder's engine job (a cancelled job makes other
  // calls wait for it instead of failing).
  void SetJob(Session& session, std::shared_ptr<JobHandle> job);

  // Takes the session as a reader. Same errors as Acquire.
  absl::StatusOr<std::shared_ptr<Session>> AcquireShared(const std::string& id, const char* what,
                                                         absl::Time deadline);
  void ReleaseShared(Session& session);
  // For sessions made idle another way than Release (fork branches, set
  // idle under UnderLock): tells the page pool of each one MakeRoom could
  // now evict, so callers waiting for KV room try again. (A fork's
  // branches share every page of their source, so evicting them frees
  // room only together with the source, whose ReleaseShared wakes the
  // waiters again.)
  void NoteIdle(std::span<const std::shared_ptr<Session>> sessions);

  // Sets or drops the session's resident KV (under the mutex, so readers
  // see resident() consistently).
  void SetKv(Session& session, KvSequence kv);
  // Drops an idle, clean session's KV; false if it is held, dirty or not
  // resident (then nothing changes).
  bool EvictIfIdle(Session& session);
  // Resident, unheld, clean sessions, least recently used first (a snapshot:
  // each may have changed by the time the caller looks).
  std::vector<std::shared_ptr<Session>> EvictionCandidates() const;

  // Idle expiry (session_expiry.h). The ids of the sessions nobody holds
  // whose last use (session.h last_used_us) is before `cutoff_us`, in id
  // order; sessions of another model or KV geometry (`foreign`) are left
  // out. A snapshot: each may have been used by the time the caller looks.
  std::vector<std::string> UnusedSince(int64_t cutoff_us) const;
  // Takes session `id` exclusively for `what` when nobody holds it and its
  // last use is still before `cutoff_us`, without counting as a use, and
  // marks it `expiring` (calls that find it wait for the delete instead of
  // answering ABORTED). NOT_FOUND (no such session), ABORTED (held, used
  // since, or foreign). On error nothing changes.
  absl::StatusOr<std::shared_ptr<Session>> TakeIfUnusedSince(const std::string& id, int64_t cutoff_us,
                                                             const char* what);
  // Gives back a session TakeIfUnusedSince took (its delete failed), still
  // not counted as used.
  void ReturnUnused(Session& session);

  // Runs f() with the registry's mutex held.
  template <typename F>
  auto UnderLock(F&& f) const {
    absl::MutexLock lock(&mu_);
    return f();
  }

  absl::StatusOr<SessionInfo> Get(const std::string& id, bool include_tokens) const;
  // Sessions with id > `after`, in id order, at most `limit`; only those of
  // tenant `owner` unless it is null.
  std::vector<SessionInfo> List(const std::string& after, int limit,
                                const std::string* owner = nullptr) const;
  int session_count() const;
  int resident_count() const;
  int checkpoint_count() const;

  void AddCheckpoint(const CheckpointRecord& checkpoint);
  absl::StatusOr<CheckpointRecord> GetCheckpoint(const std::string& id) const;  // NOT_FOUND
  bool HasCheckpoint(const std::string& id) const;
  // Whether session / checkpoint `id` exists and belongs to `tenant`: one
  // map lookup under the lock, and nothing copied, whether the id is
  // missing, another tenant's or the tenant's own (SessionOwnership).
  bool SessionVisibleTo(const std::string& id, const std::string& tenant) const;
  bool CheckpointVisibleTo(const std::string& id, const std::string& tenant) const;
  void RemoveCheckpoint(const std::string& id);
  // Checkpoints with id > `after` (of `session_id` unless empty, of tenant
  // `owner` unless null), in id order, at most `limit`.
  std::vector<CheckpointRecord> ListCheckpoints(const std::string& session_id,
                                                const std::string& after, int limit,
                                                const std::string* owner = nullptr) const;

 private:
  SessionInfo Describe(const Session& s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The session for `id` once `can_take` holds for it, waiting as the
  // protocol above allows; the caller then takes it under mu_ (held but
  // for a moment when the wait begins, BlockingWait; the session is then
  // looked up again).
  absl::StatusOr<std::shared_ptr<Session>> WaitToTake(const std::string& id, const char* what,
                                                      bool exclusive, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Caches the page counts GetSession shows while the session is held.
  void NoteKvPages(Session& s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells the pool (NoteRoomMayBeMade) when `s` is one EvictIfIdle would
  // drop: whoever waits for KV room tries again. Called wherever a session
  // may become idle, clean and resident: Add, Release, ReleaseShared,
  // MarkPersisted, ReturnUnused, NoteIdle.
  void NoteIfEvictable(const Session& s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds or replaces sessions_[session->id], keeping owned_ in step.
  void Insert(std::shared_ptr<Session> session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `key` out of `index[owner]` (and the owner out once empty).
  template <typename Key>
  static void Unindex(std::map<std::string, std::set<Key>>& index, const std::string& owner, const Key& key) {
    auto it = index.find(owner);
    if (it == index.end()) return;
    it->second.erase(key);
    if (it->second.empty()) index.erase(it);
  }
  // Counts (+1) or takes back (-1) `s`'s stored record in stored_, when
  // it has been written.
  void CountStored(const Session& s, int sign) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountStored(const CheckpointRecord& c, int sign) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // QuotaExceeded unless `more` sessions of `owner` fit its quota.
  absl::Status TenantRoom(const std::string& owner, int more) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  PagePool* const pool_;  // page counts, and NoteRoomMayBeMade
  const int max_sessions_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, CheckpointRecord> checkpoints_ ABSL_GUARDED_BY(mu_);
  // Each owner's sessions and checkpoint ids (ForEachOwnedBy, the counts).
  std::map<std::string, std::set<const Session*>> owned_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<std::string>> owned_checkpoints_ ABSL_GUARDED_BY(mu_);
  // What the store holds of each owner's sessions (those written at least
  // once) and checkpoints.
  TenantStoreBytes stored_ ABSL_GUARDED_BY(mu_);
  std::function<int64_t(const std::string&)> tenant_limit_;
  std::function<int64_t(const std::string&)> tenant_checkpoint_limit_;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_SESSION_REGISTRY_H_
