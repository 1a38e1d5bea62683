// SessionManager: the registry of sessions and everything that happens to a
// session outside the engine's forward passes: creation, acquisition for a
// job (loading its KV from disk on first use), persistence after each job,
// fork, snapshot, restore, delete, listing, and eviction of idle KV under
// memory pressure.
//
// Persistence: every successful mutation is written to the SessionStore
// before it is acknowledged. A session record lists the hashes of the KV
// pages it covers; the store writes only pages it does not hold yet
// (content-addressed, so forks and repeated prefixes are stored once).
//
// Busy protocol: a job (engine) or a manager operation acquires a session
// (busy = true) and releases it when done; a second acquisition fails with
// FAILED_PRECONDITION. While busy, the holder owns the session's KV, token
// list and page hashes (it writes `tokens` under the manager's lock, so
// readers under the lock see a consistent length).
//
// Thread safety: all methods are thread-safe. Methods that touch the store
// block on disk I/O; the gRPC layer calls them from its TaskExecutor.
#ifndef KVSESSION_SERVICE_SESSION_MANAGER_H_
#define KVSESSION_SERVICE_SESSION_MANAGER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cache/page_pool.h"
#include "cache/session_record.pb.h"
#include "cache/session_store.h"
#include "model/model.h"
#include "service/session.h"

namespace kvs {

struct ServiceLimits {
  int max_sessions = 10000;
  int max_context = 0;  // tokens per session (<= the model's context)
  int max_tokens_per_generate = 4096;
  int max_fork_count = 64;
  int max_input_bytes = 1 << 20;
  int max_labels = 64;
  int max_label_bytes = 256;
};

// A copy of a session's metadata, safe to read without locks.
struct SessionInfo {
  std::string id;
  int length = 0;
  SamplingParams sampling;
  std::map<std::string, std::string> labels;
  int64_t create_time_us = 0;
  int64_t update_time_us = 0;
  bool busy = false;
  bool resident = false;
  std::string parent_session_id;
  std::string checkpoint_id;
  int kv_pages = 0;
  int kv_pages_shared = 0;
  std::vector<int32_t> tokens;  // only when asked for
};

class SessionManager {
 public:
  SessionManager(const Model& model, PagePool* pool, SessionStore* store,
                 std::string model_fingerprint, const ServiceLimits& limits);

  const ServiceLimits& limits() const { return limits_; }
  const std::string& model_fingerprint() const { return fingerprint_; }
  PagePool* pool() const { return pool_; }
  SessionStore* store() const { return store_; }

  // Registers every session and checkpoint in the store (KV stays on disk
  // until first use). Sessions made with another model or KV geometry are
  // listed but answer FAILED_PRECONDITION when used.
  absl::Status LoadFromStore();

  // A new, empty, resident session (its first token is BOS when the
  // vocabulary uses one), already acquired by the caller. Not persisted
  // until PersistAndRelease. RESOURCE_EXHAUSTED at the session limit.
  absl::StatusOr<std::shared_ptr<Session>> CreateAcquired(
      const SamplingParams& sampling, const std::map<std::string, std::string>& labels);

  // Marks the session busy and makes its KV resident (loading it from disk
  // if needed). NOT_FOUND, FAILED_PRECONDITION (busy, or another model's
  // session), DATA_LOSS (stored bytes fail their checksum),
  // RESOURCE_EXHAUSTED (no KV memory even after evicting idle sessions).
  absl::StatusOr<std::shared_ptr<Session>> Acquire(const std::string& id);

  // Persists the session's current state (new pages and record in one
  // atomic write), then releases it. On a store error the session is
  // released but stays marked dirty (it is never evicted, and the next
  // release retries the write).
  absl::Status PersistAndRelease(const std::shared_ptr<Session>& session);
  // Persists an acquired session and returns the record written.
  absl::StatusOr<SessionRecord> Persist(const std::shared_ptr<Session>& session);
  // Releases without writing (nothing changed).
  void Release(const std::shared_ptr<Session>& session);
  // Forgets an acquired session that was never persisted (failed create).
  void Discard(const std::shared_ptr<Session>& session);

  // Appends tokens to an acquired session (under the manager lock, so
  // concurrent readers see a consistent length).
  void AppendTokens(Session& session, std::span<const int32_t> tokens);
  void ReserveTokens(Session& session, size_t more);

  absl::StatusOr<std::vector<std::shared_ptr<Session>>> Fork(
      const std::string& id, int count, const std::vector<uint64_t>& seeds,
      const std::map<std::string, std::string>& labels);
  absl::StatusOr<CheckpointRecord> Snapshot(const std::string& id, const std::string& name,
                                            int64_t* bytes_written);
  absl::StatusOr<std::shared_ptr<Session>> RestoreCheckpoint(
      const std::string& checkpoint_id, const std::map<std::string, std::string>& labels);
  absl::StatusOr<std::shared_ptr<Session>> RestoreSession(const std::string& id);
  absl::Status Delete(const std::string& id);
  absl::Status DeleteCheckpoint(const std::string& id);

  absl::StatusOr<SessionInfo> Get(const std::string& id, bool include_tokens) const;
  SessionInfo Describe(const Session& session) const;
  // Sessions with id > `after`, in id order, at most `limit`.
  std::vector<SessionInfo> List(const std::string& after, int limit) const;
  std::vector<CheckpointRecord> ListCheckpoints(const std::string& session_id,
                                                const std::string& after, int limit) const;

  // Prefix cache: page hashes of the session's full KV pages are computed
  // and registered with the pool as pages fill up.
  void RegisterFullPages(Session& session);
  // Before prefilling: attaches cached pages for the next whole pages of
  // tokens (up to `max_tokens`) and returns how many tokens they cover.
  int AttachCachedPrefix(Session& session, int max_tokens);

  // Drops the KV of least recently used idle sessions (all persisted) until
  // `pages_wanted` pages are free or nothing idle is left. Returns whether
  // enough pages are free.
  bool EvictIdle(int64_t pages_wanted);

  int session_count() const;
  int resident_count() const;

 private:
  absl::Status LoadKv(Session& session);
  SessionRecord BuildRecord(const Session& session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<Session> FromRecord(const SessionRecord& record) const;
  absl::Status CheckCapacity(int more) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static std::string NewId(const char* prefix);
  static uint64_t RandomSeed();

  const Model& model_;
  PagePool* const pool_;
  SessionStore* const store_;
  const std::string fingerprint_;
  const ServiceLimits limits_;
  const KvGeometry geometry_;

  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, CheckpointRecord> checkpoints_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_SESSION_MANAGER_H_
