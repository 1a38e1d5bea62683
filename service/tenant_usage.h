// TenantUsage: what each tenant uses of its quotas (auth/tenant_quotas.h),
// and the checks that refuse, with RESOURCE_EXHAUSTED naming the quota and
// its limit (QuotaExceeded), what would take a tenant past one. On a
// refusal nothing changes (the caller has not started the operation).
//
// A tenant's usage, as GetServerInfo and the metrics show it:
//   sessions     sessions whose owner is the tenant, resident or on disk
//                (SessionRegistry counts them; Add refuses past the quota,
//                so a Fork makes all its branches or none).
//   kv_bytes     page_bytes x the tenant's KV pages: the pool pages that
//                hold a reference of the tenant's (PagePool::PagesHeldBy
//                under the tenant's PageOwners number: its sessions' pages,
//                resident or being written or loaded; a page shared by its
//                forks counts once, one only the prefix cache keeps counts
//                not at all), plus, for every running job of the tenant,
//                the pages the job may still add: its worst case (input +
//                max_tokens, capped at the context) less the pages its
//                session holds now (KvSequence::shared_page_count). With
//                --shared-prefix-cache a page several tenants hold counts
//                for each of them. While jobs run it is an upper bound;
//                when the tenant is idle it is exact.
//   store_bytes  the encoded bytes the store holds for the tenant: every
//                distinct page hash its session and checkpoint records
//                reference, at its encoded size (EncodedPageBytes; pages
//                are content-addressed and salted per tenant, so a page
//                shared by the tenant's records counts once and no page
//                is shared with another tenant), plus each record's
//                encoded size, plus the worst case its running jobs may
//                still write, plus the estimates its Fork, Snapshot,
//                Restore and ImportSession calls under way have reserved
//                (below; reserved only while the tenant has a store
//                quota).
//   generates    the tenant's running engine jobs: Generate, Append and
//                CreateSession with input (each a forward-pass job that
//                holds a session; Append is counted because it costs the
//                same compute as a Generate's prompt); and the Generate
//                streams stopped because their client did not read them
//                (generate_reactor.h), until the stream ends: each holds
//                its unsent tokens in RAM, so their number is bounded too.
//   checkpoints  checkpoints whose owner is the tenant (SessionRegistry
//                counts them; Snapshot and a checkpoint import refuse
//                past the quota, SessionRegistry::CheckpointRoom).
//
// Enforcement:
//   AdmitJob      before an engine job starts: max_generates, then
//                 max_kv_bytes (evicting the tenant's own idle, persisted
//                 sessions' KV, least recently used first, before
//                 refusing), then max_store_bytes with the job's worst-case
//                 store growth, all against the reservations of the
//                 tenant's other running jobs. A job admitted this way
//                 never takes the tenant past a quota when it persists, so
//                 no acknowledged result is ever refused after the fact:
//                 a job that might cross the store quota is refused at its
//                 start, before it changes anything.
//   ReserveFork / ReserveSnapshot / ReserveRestore
//                 max_store_bytes before the records are written (branches
//                 and checkpoints share the source's pages, so they add
//                 their records: estimated as the source's record size, plus
//                 the labels the request adds to each, plus one page per
//                 branch for a fork cut mid-page, plus, for a source whose
//                 last write failed, what that write left unsaved: its
//                 pages and its record's growth, Session::unsaved_*), and the
//                 estimate reserved until the caller drops the claim, once
//                 the records are written or refused. The service reserves
//                 a Fork's and a Snapshot's once it holds the session, just
//                 before the write (SessionManager::Fork / Snapshot
//                 `reserve`), so the session's record and unsaved pages
//                 cannot change in between; a Restore's before it waits up
//                 to its deadline for KV room. So concurrent writes of one
//                 tenant are counted against each other as engine jobs are.
//   ReserveImport max_store_bytes before an imported stream is written, as
//                 the stream's size (pages the store holds already are
//                 counted too: an upper bound), reserved the same way. The
//                 sessions quota is the registry's (SessionManager::Import).
// Residual imprecision: KV loaded outside an engine job (a Restore, a Fork
// or Snapshot of a session whose KV was on disk) is not checked against
// max_kv_bytes (the tenant's next job evicts it if needed). The Reserve
// estimates are bounds: a checkpoint's Restore writes its record only
// while the checkpoint holds its pages (SessionManager::RestoreCheckpoint
// answers NOT_FOUND once a concurrent DeleteCheckpoint has removed it), so
// it never writes pages. (A caller that reserves a Fork or Snapshot before
// it holds the session misses what a holder's write changes meanwhile.)
// A claim held for a moment
// after its records are written counts them twice: a concurrent call of
// the tenant may be refused near the quota then.
//
// Cost: both byte counts are kept as they change, so a count is a lookup
// plus a walk of the server's claims (running jobs and store writes under
// way), whatever the tenant's sessions and pages: store_bytes by the
// registry as records are written and removed (SessionRegistry::
// stored_bytes, TenantStoreBytes), kv_bytes by the pool as references are
// taken and dropped (PagePool::PagesHeldBy).
//
// Thread safety: every method is thread-safe. AdmitJob and the Reserve
// calls are serialised per server (one mutex), then read the registry under its
// mutex.
// Borrows the SessionManager and the TenantQuotas, which must outlive it.
#ifndef KVSESSION_SERVICE_TENANT_USAGE_H_
#define KVSESSION_SERVICE_TENANT_USAGE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "service/auth/tenant_quotas.h"
#include "service/engine.h"
#include "service/session_manager.h"

namespace kvs {

struct TenantUsageFigures {
  int64_t sessions = 0;
  int64_t kv_bytes = 0;
  int64_t store_bytes = 0;
  int64_t generates = 0;
  int64_t checkpoints = 0;
  int64_t get(Quota q) const;
};

class TenantUsage;

// A claim on a tenant's quotas: a running engine job's (AdmitJob), or a
// store write's (the Reserve* calls). Destroying it (when the job has
// ended, or the write is done) gives the claim back. EndReservations gives
// back the job's KV and store reservations and keeps it in the generates
// count until destroyed (ReleaseWhenDone calls it when the job ends).
class TenantClaim {
 public:
  ~TenantClaim();
  void EndReservations();
  TenantClaim(const TenantClaim&) = delete;
  TenantClaim& operator=(const TenantClaim&) = delete;

 private:
  friend class TenantUsage;
  TenantClaim(TenantUsage* usage, uint64_t id) : usage_(usage), id_(id) {}
  TenantUsage* const usage_;
  const uint64_t id_;
};

class TenantUsage {
 public:
  // Installs the max_sessions and max_checkpoints quotas in the manager's
  // registry.
  TenantUsage(SessionManager* sessions, const TenantQuotas* quotas);

  const TenantQuotas& quotas() const { return *quotas_; }
  TenantUsageFigures Usage(const std::string& tenant) const;

  // Admits an engine job on `session`, which the caller holds exclusively
  // with its KV resident, and which may add up to `new_tokens` tokens;
  // `generate`: whether it counts against max_generates. QuotaExceeded
  // (RESOURCE_EXHAUSTED) as above; the returned claim must live until the
  // job has ended (ReleaseWhenDone).
  absl::StatusOr<std::shared_ptr<TenantClaim>> AdmitJob(const Session& session, int64_t new_tokens,
                                                      bool generate);
  // Store checks and reservations before a Fork of `count` branches (cut
  // at `at_length` tokens, or the whole source) that adds `labels` to each
  // branch, a Snapshot, a Restore of a checkpoint with `labels`. The claim
  // holds the estimate in the tenant's store_bytes until it is destroyed,
  // which the caller does once the write has succeeded or failed. Null
  // (nothing reserved) when the tenant has no store quota or the id does not
  // exist (the operation answers NOT_FOUND itself). QuotaExceeded
  // (RESOURCE_EXHAUSTED): nothing reserved.
  absl::StatusOr<std::shared_ptr<TenantClaim>> ReserveFork(const std::string& session_id, int count, bool cut,
                                                           const std::map<std::string, std::string>& labels);
  absl::StatusOr<std::shared_ptr<TenantClaim>> ReserveSnapshot(const std::string& session_id);
  absl::StatusOr<std::shared_ptr<TenantClaim>> ReserveRestore(const std::string& checkpoint_id,
                                                              const std::map<std::string, std::string>& labels);
  // The same before an ImportSession writes `stream_bytes` (the stream's
  // record and pages: at most what it adds) for `owner`.
  absl::StatusOr<std::shared_ptr<TenantClaim>> ReserveImport(const std::string& owner, int64_t stream_bytes);

 private:
  friend class TenantClaim;
  // An engine job's claim, or (no page count) a store write's.
  struct Claim {
    std::string tenant;
    // The job's session's page count (KvSequence::shared_page_count), and
    // the most pages the job may take it to: it may add the difference.
    std::shared_ptr<const std::atomic<int>> page_count;
    int64_t target_pages = 0;
    int64_t store_bytes = 0;    // store bytes it may add
    bool generate = false;
  };
  void End(uint64_t id);
  void EndReservations(uint64_t id);
  int64_t KvPagesLocked(const std::string& tenant) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t StoreBytesLocked(const std::string& tenant) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::shared_ptr<TenantClaim>> ReserveStoreGrowth(const std::string& tenant, int64_t bytes);
  std::shared_ptr<TenantClaim> AddClaimLocked(Claim claim) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What writes of session `id`'s state add to the store: `record_bytes`
  // for each new record like its own (a checkpoint, a branch), and
  // `unsaved_bytes` once when its last write failed (the pages that write
  // left unsaved, and its own record's growth; Session::unsaved_*). An
  // empty owner when there is no such session.
  struct SessionWriteEstimate {
    std::string owner;
    int64_t record_bytes = 0;
    int64_t unsaved_bytes = 0;
  };
  SessionWriteEstimate EstimateSessionWrite(const std::string& id) const;

  SessionManager* const sessions_;
  const TenantQuotas* const quotas_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, Claim> claims_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

// `inner` with `job` kept alive until its OnDone has run; there the job's
// reservations end, and `job` is released (others may hold it longer).
std::shared_ptr<JobListener> ReleaseWhenDone(std::shared_ptr<JobListener> inner,
                                             std::shared_ptr<TenantClaim> job);

}  // namespace kvs

#endif  // KVSESSION_SERVICE_TENANT_USAGE_H_
