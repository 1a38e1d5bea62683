// SessionManager: everything that happens to a session outside the
// engine's forward passes, as operations named for the caller: create,
// acquire for a job (loading its KV from disk on first use), persist and
// release after a job, fork, snapshot, restore, delete, describe, and
// making KV room by evicting idle sessions.
//
// It composes three parts, each in its own file:
//   SessionRegistry     ids -> sessions and checkpoints; the busy protocol
//   SessionPersistence  record + new pages to the store; pages back to RAM
//   record_convert      Session <-> SessionRecord
// and hands the engine a SessionKv per job (session_kv.h).
//
// Persistence: every successful mutation is written to the SessionStore
// before it is acknowledged. A session record lists the hashes of the KV
// pages it covers; the store writes only pages it does not hold yet
// (content-addressed, so forks and repeated prefixes are stored once).
// A failed write leaves the session dirty (RAM newer than disk): it is
// never evicted, and the next persist of it retries the write.
//
// Thread safety: all methods are thread-safe. Methods that touch the store
// block on disk I/O; the gRPC layer calls them from its TaskExecutor.
#ifndef KVSESSION_SERVICE_SESSION_MANAGER_H_
#define KVSESSION_SERVICE_SESSION_MANAGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cache/page_pool.h"
#include "cache/session_record.pb.h"
#include "cache/session_store.h"
#include "model/model.h"
#include "service/record_convert.h"
#include "service/session.h"
#include "service/session_kv.h"
#include "service/session_migration.h"
#include "service/page_owners.h"
#include "service/session_persistence.h"
#include "service/session_registry.h"

namespace kvs {

struct ServiceLimits {
  int max_sessions = 10000;
  // Checkpoints the server holds (each keeps its record in RAM): Snapshot
  // and the import of a checkpoint answer RESOURCE_EXHAUSTED past it.
  int max_checkpoints = 100000;
  int max_context = 0;  // tokens per session (<= the model's context)
  int max_tokens_per_generate = 4096;
  int max_fork_count = 64;
  int max_input_bytes = 1 << 20;
  int max_labels = 64;
  int max_label_bytes = 256;
  // kvsessiond --delete-idle-sessions-after, for GetServerInfo (the
  // expiry itself is SessionExpiry's); zero: never.
  absl::Duration idle_session_ttl = absl::ZeroDuration();
};

class SessionManager : public KvRoomMaker {
 public:
  SessionManager(const Model& model, PagePool* pool, SessionStore* store,
                 std::string model_fingerprint, const ServiceLimits& limits);

  const ServiceLimits& limits() const { return limits_; }
  // kvsessiond --shared-prefix-cache: sessions created from now on chain
  // their page hashes unsalted whatever their tenant, so every tenant's
  // identical prefix shares pages (cache/page_hash.h ChainStart). Sessions
  // keep the chain they were created with. Call before serving.
  void SetSharedPrefixCache(bool shared) { shared_prefix_cache_ = shared; }
  const std::string& model_fingerprint() const { return context_.model_fingerprint; }
  PagePool* pool() const { return pool_; }
  // The numbers under which the pool counts each tenant's pages.
  PageOwners* page_owners() { return &page_owners_; }
  SessionStore* store() const { return store_; }

  // Registers every session and checkpoint in the store (KV stays on disk
  // until first use). Sessions made with another model or KV geometry are
  // listed but answer FAILED_PRECONDITION when used.
  absl::Status LoadFromStore();
  // The most tokens any session found by LoadFromStore holds (0 before it,
  // or for an empty store): the KV the longest restore will need.
  int64_t longest_stored_session_tokens() const { return longest_stored_session_tokens_; }

  // A new, empty, resident session (its first token is BOS when the
  // vocabulary uses one), already acquired by the caller. Not persisted
  // until PersistAndRelease. RESOURCE_EXHAUSTED at the session limit.
  // It belongs to tenant `owner`. Its id carries `route_key` (a valid key,
  // proto/route_key.h, or empty for an id without one); its forks,
  // checkpoints and the sessions restored from those inherit the key.
  absl::StatusOr<std::shared_ptr<Session>> CreateAcquired(
      const SamplingParams& sampling, const std::map<std::string, std::string>& labels,
      const std::string& owner = kDefaultTenant, std::string_view route_key = {});

  // Takes the session exclusively for `what` (a Generate or an Append)
  // and makes its KV resident (loading it from disk if needed). NOT_FOUND,
  // FAILED_PRECONDITION (another model's session), ABORTED (another call
  // holds it and does not let go before `deadline`: session_registry.h),
  // DATA_LOSS (stored bytes fail their checksum), RESOURCE_EXHAUSTED (no KV
  // memory even after evicting idle sessions, until `deadline`). On error
  // the session is left as it was.
  absl::StatusOr<std::shared_ptr<Session>> Acquire(const std::string& id,
                                                   const char* what = "Generate",
                                                   absl::Time deadline = absl::Now());
  // The acquired session's engine job: while it runs the session is busy;
  // once it is cancelled, other calls wait for it to end.
  void SetJob(Session& session, std::shared_ptr<JobHandle> job) {
    registry_.SetJob(session, std::move(job));
  }

  // The engine's handle on an acquired session's KV (session_kv.h).
  SessionKv OpenKv(Session& session) { return SessionKv(&session, pool_, this); }

  // Persists the session's current state (new pages and record in one
  // atomic write), then releases it. On a store error the session is
  // released but stays marked dirty (it is never evicted, and the next
  // persist retries the write).
  // `described`, if not null, receives the session as released.
  absl::Status PersistAndRelease(const std::shared_ptr<Session>& session,
                                 SessionInfo* described = nullptr);
  // Persists an acquired session and returns the record written.
  absl::StatusOr<SessionRecord> Persist(const std::shared_ptr<Session>& session);
  // Releases without writing (nothing changed).
  void Release(const std::shared_ptr<Session>& session) { registry_.Release(*session); }
  // Forgets an acquired session that was never persisted (failed create).
  void Discard(const std::shared_ptr<Session>& session) { registry_.Remove(session->id); }

  // `count` new sessions sharing the source's KV pages, persisted. Fork is
  // a reader: any number run at once on an idle session. Branches without
  // a seed in `seeds` get seeds drawn from the source's random generator,
  // whose new state is stored with the branches (so a restored twin of the
  // source forks identically). NOT_FOUND, FAILED_PRECONDITION (another
  // model's session), ABORTED (a Generate, Append or Delete holds the
  // source), RESOURCE_EXHAUSTED (session limit, or no KV memory to load a
  // stored source even after evicting idle sessions, until `deadline`, as
  // Acquire), store errors; on error no
  // branch exists and the source is unchanged.
  // `at_length`, if set, makes the branches the source's first at_length
  // tokens (session_rewind.h: shared pages, no copy): INVALID_ARGUMENT
  // below MinSessionLength, OUT_OF_RANGE past the source's length.
  // A branch's labels are the source's with `labels` over them:
  // INVALID_ARGUMENT past limits().max_labels together.
  // `reserve`, if set, runs once the source is held (no writer can change
  // its record until the branches are written) and before its KV is
  // loaded: the caller reserves the store bytes the write may add there
  // (TenantUsage::ReserveFork). Its error is the Fork's: nothing loaded or
  // written.
  absl::StatusOr<std::vector<std::shared_ptr<Session>>> Fork(
      const std::string& id, int count, const std::vector<uint64_t>& seeds,
      const std::map<std::string, std::string>& labels, absl::Time deadline = absl::Now(),
      std::optional<int> at_length = std::nullopt,
      const std::function<absl::Status()>& reserve = nullptr);
  // Cuts the session to its first `length` tokens (session_rewind.h) and
  // persists it before returning it as released; `removed` (if not null)
  // receives the number of tokens dropped. KV pages wholly past the cut go
  // back to the pool (or stay with the forks that share them); the page
  // hashes of dropped pages leave the session's chain and its record. The
  // random generator, sampling defaults, labels and parent are unchanged.
  // Exclusive, like Acquire, with its errors (NOT_FOUND, ABORTED while
  // another call holds it, FAILED_PRECONDITION, DATA_LOSS and
  // RESOURCE_EXHAUSTED loading a KV from disk); INVALID_ARGUMENT for a
  // length below MinSessionLength, OUT_OF_RANGE past the session's length
  // (length == the session's length changes and writes nothing); store
  // errors. On error the session is unchanged, in RAM and on disk.
  // Defined in session_truncate.cc.
  absl::StatusOr<SessionInfo> Truncate(const std::string& id, int length, int* removed = nullptr,
                                       absl::Time deadline = absl::Now());
  // A checkpoint of the session's current state. A reader, like Fork.
  // RESOURCE_EXHAUSTED when the server holds max_checkpoints already, or
  // the session's owner its max_checkpoints quota (tenant_quotas.h).
  // `reserve`, if set, runs once the session is held, under its
  // persist_mu, before its record is written again and copied
  // (TenantUsage::ReserveSnapshot); its error is the Snapshot's.
  absl::StatusOr<CheckpointRecord> Snapshot(const std::string& id, const std::string& name,
                                            int64_t* bytes_written,
                                            absl::Time deadline = absl::Now(),
                                            const std::function<absl::Status()>& reserve = nullptr);
  // A new session from the checkpoint, its KV loaded (waiting until
  // `deadline` for KV room, as Acquire) and its record written. The
  // record is written only while the checkpoint exists (DeleteCheckpoint
  // waits for the write), so the write adds the record and no page; a
  // checkpoint deleted before that (even if listed again since, by an
  // import under the same id, with other pages) is NOT_FOUND "was
  // deleted", nothing written.
  absl::StatusOr<std::shared_ptr<Session>> RestoreCheckpoint(
      const std::string& checkpoint_id, const std::map<std::string, std::string>& labels,
      absl::Time deadline = absl::Now());
  absl::StatusOr<std::shared_ptr<Session>> RestoreSession(const std::string& id,
                                                          absl::Time deadline = absl::Now());
  // Exclusive, like Acquire.
  absl::Status Delete(const std::string& id, absl::Time deadline = absl::Now());
  // Idle expiry (session_expiry.h): the sessions nobody holds and nobody
  // has used since `cutoff` (SessionRegistry::UnusedSince), a snapshot.
  std::vector<std::string> UnusedSince(absl::Time cutoff) const {
    return registry_.UnusedSince(absl::ToUnixMicros(cutoff));
  }
  // Deletes session `id` as Delete does if it is there, nobody holds it and
  // nobody has used it since `cutoff` (checked as it is taken): true when
  // deleted, false when not taken (gone, held, used since, another
  // model's). Store errors leave the session as it was, its idle time
  // included.
  absl::StatusOr<bool> DeleteIfUnusedSince(const std::string& id, absl::Time cutoff);
  absl::Status DeleteCheckpoint(const std::string& id);
  // Test seam: runs in every RestoreCheckpoint after the KV is loaded and
  // before the record is written (a test deletes the checkpoint there).
  // Set before the calls it affects.
  void SetAfterRestoreLoadForTest(std::function<void()> hook) {
    after_restore_load_for_test_ = std::move(hook);
  }

  absl::StatusOr<SessionInfo> Get(const std::string& id, bool include_tokens) const {
    return registry_.Get(id, include_tokens);
  }
  // `owner`: only that tenant's (null: everyone's).
  std::vector<SessionInfo> List(const std::string& after, int limit,
                                const std::string* owner = nullptr) const {
    return registry_.List(after, limit, owner);
  }
  std::vector<CheckpointRecord> ListCheckpoints(const std::string& session_id,
                                                const std::string& after, int limit,
                                                const std::string* owner = nullptr) const {
    return registry_.ListCheckpoints(session_id, after, limit, owner);
  }
  // Whether `id` exists and belongs to `tenant` (SessionRegistry).
  bool SessionVisibleTo(const std::string& id, const std::string& tenant) const {
    return registry_.SessionVisibleTo(id, tenant);
  }
  bool CheckpointVisibleTo(const std::string& id, const std::string& tenant) const {
    return registry_.CheckpointVisibleTo(id, tenant);
  }
  // The checkpoint's tenant; NOT_FOUND "no checkpoint 'ID'".
  absl::StatusOr<std::string> CheckpointOwnerOf(const std::string& id) const {
    absl::StatusOr<CheckpointRecord> c = registry_.GetCheckpoint(id);
    if (!c.ok()) return c.status();
    return CheckpointOwner(*c);
  }

  // Migration (session_migration.cc, cache/migration_stream.h).
  // The stream of a stored session or checkpoint as persisted (what was
  // acknowledged; a busy session is read like a reader would, without
  // waiting), with every page of its record not in `omit`. Reads the
  // store only. NOT_FOUND, DATA_LOSS (stored bytes fail their checks),
  // RESOURCE_EXHAUSTED (over max_bytes), ABORTED (the session changed
  // under the read three times).
  absl::StatusOr<ExportedStream> Export(const ExportRequest& request) const;
  // Writes a decoded stream (the caller decoded it: DecodeMigrationStream,
  // and checked the caller may own it) in one atomic store write and lists
  // it, not resident. FAILED_PRECONDITION (another model or KV geometry; a
  // page the stream omits that the store does not hold), ALREADY_EXISTS
  // (the id is listed here), RESOURCE_EXHAUSTED (session limit, disk
  // full), INVALID_ARGUMENT (the record breaks the store's invariants, a
  // page is not of its geometry, or the record holds fields no session of
  // this server could: import_checks.h), store errors. On error nothing
  // changes.
  absl::StatusOr<ImportResult> Import(const MigrationContents& contents);
  // Whether the store holds the page (FindMissingPages).
  bool HasStoredPage(const PageHash& hash) const { return store_->HasPage(hash); }

  // KvRoomMaker: drops the KV of least recently used idle sessions (all
  // persisted) until `pages_wanted` pages are free or nothing idle is left.
  // Returns whether enough pages are free.
  bool MakeRoom(int64_t pages_wanted) override;

  // The registry, for tenant quota accounting (service/tenant_usage.h).
  SessionRegistry* registry() { return &registry_; }
  const RecordContext& record_context() const { return context_; }

  int session_count() const { return registry_.session_count(); }
  int resident_count() const { return registry_.resident_count(); }

 private:
  // OK, or RESOURCE_EXHAUSTED when the server holds max_checkpoints, or
  // `owner` its max_checkpoints quota (SessionRegistry::CheckpointRoom).
  absl::Status CheckCheckpointRoom(const std::string& owner) const;
  // INVALID_ARGUMENT when `source` with `added` over it has more than
  // limits().max_labels labels (a Fork's branch).
  absl::Status CheckMergedLabels(const std::map<std::string, std::string>& source,
                                 const std::map<std::string, std::string>& added) const;
  // PREFIX [route_key "."] 32 random hex digits (proto/route_key.h).
  static std::string NewId(const char* prefix, std::string_view route_key);
  // Sets the page-hash chain of a session whose KV was just loaded.
  void AdoptStoredHashes(Session& session) const;
  // Deletes a session the caller holds exclusively from the store, then
  // from the registry. On a store error gives it back: Release, or, when
  // the take did not count as a use, ReturnUnused.
  absl::Status DeleteHeld(const std::shared_ptr<Session>& session, bool taken_as_use);
  // Calls `try_load` until it ends other than for want of KV room, or
  // `deadline` passes, waiting between tries for room given back in the
  // pool (PagePool::AwaitRoomGivenBack). try_load(room_seen) loads
  // through SessionPersistence::LoadKv, which sets *room_seen (-1 before
  // each try); the wait holds no lock of its own. Returns try_load's last
  // status.
  absl::Status RetryLoadWhileNoRoom(absl::Time deadline,
                                    absl::FunctionRef<absl::Status(int64_t* room_seen)> try_load);
  // The session's stored KV (SessionPersistence::LoadKv), waiting until `deadline`
  // for KV room when the pool has none that MakeRoom can free.
  absl::StatusOr<KvSequence> LoadKvWaitingForRoom(const Session& session, absl::Time deadline);
  // Makes a session held by readers resident: the load under its
  // persist_mu (one at a time), the wait for KV room, as
  // LoadKvWaitingForRoom's, without it. Call without persist_mu.
  absl::Status LoadForReaders(Session& session, absl::Time deadline);

  const Model& model_;
  PagePool* const pool_;
  SessionStore* const store_;
  const ServiceLimits limits_;
  const RecordContext context_;
  bool shared_prefix_cache_ = false;
  int64_t longest_stored_session_tokens_ = 0;  // set by LoadFromStore
  SessionRegistry registry_;
  PageOwners page_owners_;
  SessionPersistence persistence_;
  // Held by DeleteCheckpoint (as writer), and by RestoreCheckpoint (as
  // reader) while it checks its checkpoint is there and writes the
  // restored record: a delete waits for the restores' record writes
  // (small: references only, but each synced) and they for it.
  absl::Mutex checkpoint_restore_write_mu_;
  std::function<void()> after_restore_load_for_test_;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_SESSION_MANAGER_H_
