#include "service/tenant_usage.h"

#include <algorithm>
#include <optional>

#include "cache/page_codec.h"

namespace kvs {
namespace {

// Bytes a record grows by per token it gains (a token id is a varint of at
// most 5 bytes; chat state and framing take the rest), and the bytes a new
// record adds beyond its tokens (ids, labels, sampling, checkpoint name).
constexpr int64_t kRecordBytesPerToken = 8;
constexpr int64_t kRecordOverheadBytes = 1024;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// At most what `labels` add to a record: each entry's key and value plus
// its framing (a map entry's tags and lengths).
int64_t LabelBytes(const std::map<std::string, std::string>& labels) {
  constexpr int64_t kFramingPerLabel = 16;
  int64_t bytes = 0;
  for (const auto& [k, v] : labels) bytes += static_cast<int64_t>(k.size() + v.size()) + kFramingPerLabel;
  return bytes;
}

// ReleaseWhenDone's listener.
class ReleasingListener : public JobListener {
 public:
  ReleasingListener(std::shared_ptr<JobListener> inner, std::shared_ptr<TenantClaim> job)
      : inner_(std::move(inner)), job_(std::move(job)) {}
  void OnToken(const GeneratedToken& token, const std::string& text) override { inner_->OnToken(token, text); }
  void OnDone(const absl::Status& status, FinishReason reason, const JobUsage& usage,
              const std::string& final_text, const SessionInfo& session) override {
    job_->EndReservations();  // OnDone runs once, on one thread
    job_.reset();
    inner_->OnDone(status, reason, usage, final_text, session);
  }

 private:
  std::shared_ptr<JobListener> inner_;
  std::shared_ptr<TenantClaim> job_;
};

}  // namespace

int64_t TenantUsageFigures::get(Quota q) const {
  switch (q) {
    case Quota::kSessions:
      return sessions;
    case Quota::kKvBytes:
      return kv_bytes;
    case Quota::kStoreBytes:
      return store_bytes;
    case Quota::kGenerates:
      return generates;
    case Quota::kCheckpoints:
      return checkpoints;
  }
  return 0;
}

TenantClaim::~TenantClaim() { usage_->End(id_); }
void TenantClaim::EndReservations() { usage_->EndReservations(id_); }

TenantUsage::TenantUsage(SessionManager* sessions, const TenantQuotas* quotas)
    : sessions_(sessions), quotas_(quotas) {
  sessions_->registry()->SetTenantSessionLimit(
      [quotas](const std::string& tenant) { return quotas->Limits(tenant).max_sessions; });
  sessions_->registry()->SetTenantCheckpointLimit(
      [quotas](const std::string& tenant) { return quotas->Limits(tenant).max_checkpoints; });
}

void TenantUsage::End(uint64_t id) {
  absl::MutexLock lock(&mu_);
  claims_.erase(id);
}

void TenantUsage::EndReservations(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = claims_.find(id);
  if (it == claims_.end()) return;
  Claim& claim = it->second;
  claim.page_count.reset();  // the session's pages count as any idle one's again
  claim.target_pages = 0;
  claim.store_bytes = 0;
}

int64_t TenantUsage::KvPagesLocked(const std::string& tenant) const {
  const std::optional<PageOwner> owner = sessions_->page_owners()->Find(tenant);
  int64_t pages = owner ? sessions_->pool()->PagesHeldBy(*owner) : 0;
  for (const auto& [id, job] : claims_) {
    if (job.tenant != tenant || job.page_count == nullptr) continue;
    pages += std::max<int64_t>(0, job.target_pages - job.page_count->load(std::memory_order_relaxed));
  }
  return pages;
}

int64_t TenantUsage::StoreBytesLocked(const std::string& tenant) const {
  int64_t bytes = sessions_->registry()->stored_bytes(tenant);
  for (const auto& [id, job] : claims_) {
    if (job.tenant == tenant) bytes += job.store_bytes;
  }
  return bytes;
}

TenantUsageFigures TenantUsage::Usage(const std::string& tenant) const {
  TenantUsageFigures u;
  u.sessions = sessions_->registry()->owned_count(tenant);
  u.checkpoints = sessions_->registry()->owned_checkpoint_count(tenant);
  absl::MutexLock lock(&mu_);
  for (const auto& [id, job] : claims_) u.generates += job.tenant == tenant && job.generate;
  u.kv_bytes = KvPagesLocked(tenant) * static_cast<int64_t>(sessions_->pool()->geometry().page_bytes());
  u.store_bytes = StoreBytesLocked(tenant);
  return u;
}

absl::StatusOr<std::shared_ptr<TenantClaim>> TenantUsage::AdmitJob(const Session& s, int64_t new_tokens,
                                                                 bool generate) {
  const QuotaLimits limits = quotas_->Limits(s.owner);
  const KvGeometry& g = sessions_->record_context().geometry;
  const int64_t pt = g.page_tokens;
  const int64_t page_bytes = static_cast<int64_t>(g.page_bytes());
  const int64_t max_context = sessions_->limits().max_context;
  const int64_t wanted = static_cast<int64_t>(s.tokens.size()) + std::max<int64_t>(new_tokens, 0);
  const int64_t target = max_context > 0 ? std::min(wanted, max_context) : wanted;
  const int64_t pages_total = CeilDiv(target, pt);
  Claim job;
  job.tenant = s.owner;
  job.generate = generate;
  job.page_count = s.kv ? s.kv->shared_page_count() : std::make_shared<std::atomic<int>>(0);
  job.target_pages = pages_total;
  const int64_t held_pages = s.kv ? s.kv->num_pages() : 0;
  const int64_t growth_pages = std::max<int64_t>(0, pages_total - held_pages);
  // A slide rechains every page after the kept ones: all may be new.
  const int64_t store_pages =
      wanted > target ? pages_total : std::max<int64_t>(0, pages_total - s.persisted_kv_length / pt);
  job.store_bytes = store_pages * static_cast<int64_t>(EncodedPageBytes(g, static_cast<int>(pt))) +
                    (target - std::min<int64_t>(target, s.persisted_kv_length)) * kRecordBytesPerToken +
                    (s.version == 0 ? kRecordOverheadBytes : 0);

  absl::MutexLock lock(&mu_);
  if (generate && limits.max_generates > 0) {
    int64_t running = 0;
    for (const auto& [id, other] : claims_) running += other.tenant == s.owner && other.generate;
    if (running >= limits.max_generates) return QuotaExceeded(Quota::kGenerates, limits.max_generates);
  }
  if (limits.max_kv_bytes > 0) {
    auto fits = [&] {
      // The admitting session's pages are the tenant's held ones already.
      return (KvPagesLocked(s.owner) + growth_pages) * page_bytes <= limits.max_kv_bytes;
    };
    if (!fits()) {
      // The tenant's own idle sessions go first (all persisted: they come
      // back from disk on their next use).
      for (const std::shared_ptr<Session>& idle : sessions_->registry()->EvictionCandidates()) {
        if (idle->owner != s.owner || idle.get() == &s) continue;
        if (sessions_->registry()->EvictIfIdle(*idle) && fits()) break;
      }
      if (!fits()) return QuotaExceeded(Quota::kKvBytes, limits.max_kv_bytes);
    }
  }
  if (limits.max_store_bytes > 0 &&
      StoreBytesLocked(s.owner) + job.store_bytes > limits.max_store_bytes) {
    return QuotaExceeded(Quota::kStoreBytes, limits.max_store_bytes);
  }
  return AddClaimLocked(std::move(job));
}

std::shared_ptr<TenantClaim> TenantUsage::AddClaimLocked(Claim claim) {
  const uint64_t id = next_id_++;
  claims_.emplace(id, std::move(claim));
  return std::shared_ptr<TenantClaim>(new TenantClaim(this, id));
}

absl::StatusOr<std::shared_ptr<TenantClaim>> TenantUsage::ReserveStoreGrowth(const std::string& tenant,
                                                                             int64_t bytes) {
  const int64_t limit = quotas_->Limits(tenant).max_store_bytes;
  if (limit <= 0) return std::shared_ptr<TenantClaim>();
  absl::MutexLock lock(&mu_);
  if (StoreBytesLocked(tenant) + bytes > limit) return QuotaExceeded(Quota::kStoreBytes, limit);
  Claim claim;  // a store write's: no session, no pages
  claim.tenant = tenant;
  claim.store_bytes = bytes;
  return AddClaimLocked(std::move(claim));
}

TenantUsage::SessionWriteEstimate TenantUsage::EstimateSessionWrite(const std::string& id) const {
  SessionWriteEstimate estimate;
  sessions_->registry()->WithSession(id, [&](const Session& s) {
    if (!s.dirty) {
      estimate = {s.owner, s.persisted_record_bytes + kRecordOverheadBytes, 0};
      return;
    }
    const int64_t record = std::max(s.persisted_record_bytes, s.unsaved_record_bytes);
    estimate = {s.owner, record + kRecordOverheadBytes,
                s.unsaved_page_bytes + (record - s.persisted_record_bytes)};
  });
  return estimate;
}

absl::StatusOr<std::shared_ptr<TenantClaim>> TenantUsage::ReserveFork(
    const std::string& session_id, int count, bool cut, const std::map<std::string, std::string>& labels) {
  const SessionWriteEstimate source = EstimateSessionWrite(session_id);
  if (source.owner.empty()) return std::shared_ptr<TenantClaim>();
  const KvGeometry& g = sessions_->record_context().geometry;
  const int64_t per_branch =
      source.record_bytes + LabelBytes(labels) + (cut ? static_cast<int64_t>(EncodedPageBytes(g, g.page_tokens)) : 0);
  // What the source's failed write left unsaved is written once, for all branches.
  return ReserveStoreGrowth(source.owner, per_branch * count + source.unsaved_bytes);
}

absl::StatusOr<std::shared_ptr<TenantClaim>> TenantUsage::ReserveSnapshot(const std::string& session_id) {
  const SessionWriteEstimate source = EstimateSessionWrite(session_id);
  if (source.owner.empty()) return std::shared_ptr<TenantClaim>();
  return ReserveStoreGrowth(source.owner, source.record_bytes + source.unsaved_bytes);
}

absl::StatusOr<std::shared_ptr<TenantClaim>> TenantUsage::ReserveRestore(
    const std::string& checkpoint_id, const std::map<std::string, std::string>& labels) {
  absl::StatusOr<CheckpointRecord> c = sessions_->registry()->GetCheckpoint(checkpoint_id);
  if (!c.ok()) return std::shared_ptr<TenantClaim>();
  // The restored record's labels replace the checkpoint's: counted on top.
  return ReserveStoreGrowth(CheckpointOwner(*c), static_cast<int64_t>(c->session().ByteSizeLong()) +
                                                     LabelBytes(labels) + kRecordOverheadBytes);
}

absl::StatusOr<std::shared_ptr<TenantClaim>> TenantUsage::ReserveImport(const std::string& owner,
                                                                        int64_t stream_bytes) {
  return ReserveStoreGrowth(owner, stream_bytes);
}

std::shared_ptr<JobListener> ReleaseWhenDone(std::shared_ptr<JobListener> inner,
                                             std::shared_ptr<TenantClaim> job) {
  if (job == nullptr) return inner;
  return std::make_shared<ReleasingListener>(std::move(inner), std::move(job));
}

}  // namespace kvs
