#include "service/tenant_metrics.h"

#include <string>
#include <vector>

namespace kvs {

void RegisterTenantMetrics(metrics::Registry* registry, const TenantUsage* usage) {
  registry->AddCollector([usage](metrics::Exposition& out) {
    const std::vector<std::string> tenants = usage->quotas().Tenants();
    std::vector<TenantUsageFigures> figures;
    for (const std::string& t : tenants) figures.push_back(usage->Usage(t));
    struct Family {
      const char* name;
      const char* help;
      Quota quota;
    };
    static constexpr Family kFamilies[] = {
        {"kvsession_tenant_sessions", "Sessions the tenant owns (resident or stored).", Quota::kSessions},
        {"kvsession_tenant_kv_bytes", "Resident KV bytes attributed to the tenant.", Quota::kKvBytes},
        {"kvsession_tenant_store_bytes", "Stored bytes (pages and records) of the tenant.", Quota::kStoreBytes},
        {"kvsession_tenant_generates", "Engine jobs of the tenant running now.", Quota::kGenerates},
        {"kvsession_tenant_checkpoints", "Checkpoints the tenant owns.", Quota::kCheckpoints},
    };
    for (const Family& f : kFamilies) {
      out.Family(f.name, f.help, "gauge");
      for (size_t i = 0; i < tenants.size(); ++i) {
        out.Sample(f.name, {{"tenant", tenants[i]}}, static_cast<double>(figures[i].get(f.quota)));
      }
    }
    out.Family("kvsession_tenant_quota_limit", "The tenant's quota limits (0 = unlimited).", "gauge");
    for (const std::string& t : tenants) {
      const QuotaLimits l = usage->quotas().Limits(t);
      for (const Family& f : kFamilies) {
        out.Sample("kvsession_tenant_quota_limit", {{"tenant", t}, {"quota", QuotaName(f.quota)}},
                   static_cast<double>(l.get(f.quota)));
      }
    }
  });
}

}  // namespace kvs
