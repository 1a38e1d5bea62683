// Tenant metrics: each tenant's quota usage and limits as Prometheus
// gauges, read at scrape time from TenantUsage (nothing counted twice):
//   kvsession_tenant_sessions{tenant}      sessions it owns
//   kvsession_tenant_kv_bytes{tenant}      resident KV bytes (tenant_usage.h)
//   kvsession_tenant_store_bytes{tenant}   stored bytes
//   kvsession_tenant_generates{tenant}     running engine jobs
//   kvsession_tenant_quota_limit{tenant,quota}  each limit (0 = unlimited)
// One series per tenant the --auth-keys file names (kvsessiond registers
// these only with --auth-keys, so the label's values are bounded by that
// file; a SIGHUP reload changes the set). Borrows `usage`, which must
// outlive the registry's scrapes; thread-safe as TenantUsage is.
#ifndef KVSESSION_SERVICE_TENANT_METRICS_H_
#define KVSESSION_SERVICE_TENANT_METRICS_H_

#include "service/metrics_registry.h"
#include "service/tenant_usage.h"

namespace kvs {

void RegisterTenantMetrics(metrics::Registry* registry, const TenantUsage* usage);

}  // namespace kvs

#endif  // KVSESSION_SERVICE_TENANT_METRICS_H_
