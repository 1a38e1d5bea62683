// TenantQuotas: the table of per-tenant quota limits (issue 10).
//
// Five quotas, each an int64 limit where 0 means unlimited:
//   max_sessions     sessions the tenant owns (resident or only on disk)
//   max_kv_bytes     resident KV bytes attributed to the tenant
//                    (service/tenant_usage.h defines the count)
//   max_store_bytes  encoded bytes the tenant's session and checkpoint
//                    records and their pages take in the store
//   max_generates    concurrent engine jobs of the tenant (Generate,
//                    Append, and CreateSession with input)
//   max_checkpoints  checkpoints the tenant owns (each keeps a record in
//                    the server's RAM; --max-checkpoints bounds the server)
//
// Where the limits come from: kvsessiond's --tenant-max-sessions,
// --tenant-max-kv-bytes, --tenant-max-store-bytes, --tenant-max-generates,
// --tenant-max-checkpoints give every tenant's default (the flags carry a `tenant-` prefix because
// --max-sessions already bounds the whole server). A `QUOTA=VALUE` field
// on a tenant's line in --auth-keys (api_key_file.h) overrides the default
// for that tenant. When a tenant has several key lines naming the same
// quota with different values, the most restrictive wins: the smallest
// positive value, and 0 (unlimited) only when every line naming it says 0.
// A line that does not name a quota leaves it as the other lines (or the
// default) set it. Tenants the file does not name (the default tenant
// without --auth-keys) get the defaults.
//
// Thread safety: Limits() and Update() may run concurrently from any
// threads (the table is swapped whole under a mutex; a SIGHUP reload
// calls Update, and every later check sees the new limits).
#ifndef KVSESSION_SERVICE_AUTH_TENANT_QUOTAS_H_
#define KVSESSION_SERVICE_AUTH_TENANT_QUOTAS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "service/auth/api_key_file.h"

namespace kvs {

enum class Quota { kSessions, kKvBytes, kStoreBytes, kGenerates, kCheckpoints };

// "max_sessions", "max_kv_bytes", "max_store_bytes", "max_generates",
// "max_checkpoints": the keys file's names (kKeysFileQuotaNames, same order).
const char* QuotaName(Quota q);
// Every quota, in the order above.
inline constexpr Quota kAllQuotas[] = {Quota::kSessions, Quota::kKvBytes, Quota::kStoreBytes,
                                       Quota::kGenerates, Quota::kCheckpoints};

// RESOURCE_EXHAUSTED "tenant quota max_sessions=100 reached" (the limit,
// never the tenant's name or any client input).
absl::Status QuotaExceeded(Quota q, int64_t limit);

struct QuotaLimits {
  int64_t max_sessions = 0;
  int64_t max_kv_bytes = 0;
  int64_t max_store_bytes = 0;
  int64_t max_generates = 0;
  int64_t max_checkpoints = 0;
  int64_t get(Quota q) const;
  void set(Quota q, int64_t v);
};

// Each tenant's limits from a keys file over `defaults` (rules above).
std::map<std::string, QuotaLimits> TenantLimitsFromKeys(const ApiKeyFile& keys,
                                                        const QuotaLimits& defaults);

class TenantQuotas {
 public:
  explicit TenantQuotas(const QuotaLimits& defaults) : defaults_(defaults) {}
  TenantQuotas(const QuotaLimits& defaults, const ApiKeyFile& keys) : defaults_(defaults) {
    Update(keys);
  }

  // The limits of `tenant` (the defaults for a tenant the keys do not name).
  QuotaLimits Limits(const std::string& tenant) const;
  // Replaces the per-tenant table with the one `keys` gives (SIGHUP).
  void Update(const ApiKeyFile& keys);
  // The tenants the keys name, sorted (bounded by the keys file).
  std::vector<std::string> Tenants() const;
  const QuotaLimits& defaults() const { return defaults_; }

 private:
  const QuotaLimits defaults_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const std::map<std::string, QuotaLimits>> table_ ABSL_GUARDED_BY(mu_) =
      std::make_shared<const std::map<std::string, QuotaLimits>>();
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_AUTH_TENANT_QUOTAS_H_
