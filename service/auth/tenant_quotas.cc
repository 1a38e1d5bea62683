#include "service/auth/tenant_quotas.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kvs {
namespace {

// The more restrictive of two limits (0 = unlimited).
int64_t Stricter(int64_t a, int64_t b) {
  if (a == 0) return b;
  if (b == 0) return a;
  return std::min(a, b);
}

}  // namespace

const char* QuotaName(Quota q) {
  switch (q) {
    case Quota::kSessions:
      return "max_sessions";
    case Quota::kKvBytes:
      return "max_kv_bytes";
    case Quota::kStoreBytes:
      return "max_store_bytes";
    case Quota::kGenerates:
      return "max_generates";
    case Quota::kCheckpoints:
      return "max_checkpoints";
  }
  return "?";
}

absl::Status QuotaExceeded(Quota q, int64_t limit) {
  return absl::ResourceExhaustedError(absl::StrCat("tenant quota ", QuotaName(q), "=", limit, " reached"));
}

int64_t QuotaLimits::get(Quota q) const {
  switch (q) {
    case Quota::kSessions:
      return max_sessions;
    case Quota::kKvBytes:
      return max_kv_bytes;
    case Quota::kStoreBytes:
      return max_store_bytes;
    case Quota::kGenerates:
      return max_generates;
    case Quota::kCheckpoints:
      return max_checkpoints;
  }
  return 0;
}

void QuotaLimits::set(Quota q, int64_t v) {
  switch (q) {
    case Quota::kSessions:
      max_sessions = v;
      break;
    case Quota::kKvBytes:
      max_kv_bytes = v;
      break;
    case Quota::kStoreBytes:
      max_store_bytes = v;
      break;
    case Quota::kGenerates:
      max_generates = v;
      break;
    case Quota::kCheckpoints:
      max_checkpoints = v;
      break;
  }
}

std::map<std::string, QuotaLimits> TenantLimitsFromKeys(const ApiKeyFile& keys,
                                                        const QuotaLimits& defaults) {
  // Per tenant and quota: the stricter of the values its lines give.
  std::map<std::string, std::map<Quota, int64_t>> given;
  for (const ApiKeyEntry& e : keys.entries) {
    std::map<Quota, int64_t>& mine = given[e.principal.tenant];
    for (Quota q : kAllQuotas) {
      const auto it = e.quotas.find(QuotaName(q));
      if (it == e.quotas.end()) continue;
      const auto [at, inserted] = mine.emplace(q, it->second);
      if (!inserted) at->second = Stricter(at->second, it->second);
    }
  }
  std::map<std::string, QuotaLimits> table;
  for (const auto& [tenant, values] : given) {
    QuotaLimits limits = defaults;
    for (const auto& [q, v] : values) limits.set(q, v);
    table.emplace(tenant, limits);
  }
  return table;
}

QuotaLimits TenantQuotas::Limits(const std::string& tenant) const {
  std::shared_ptr<const std::map<std::string, QuotaLimits>> table;
  {
    absl::MutexLock lock(&mu_);
    table = table_;
  }
  const auto it = table->find(tenant);
  return it == table->end() ? defaults_ : it->second;
}

void TenantQuotas::Update(const ApiKeyFile& keys) {
  auto fresh = std::make_shared<const std::map<std::string, QuotaLimits>>(TenantLimitsFromKeys(keys, defaults_));
  absl::MutexLock lock(&mu_);
  table_ = std::move(fresh);
}

std::vector<std::string> TenantQuotas::Tenants() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [tenant, limits] : *table_) out.push_back(tenant);
  return out;
}

}  // namespace kvs
