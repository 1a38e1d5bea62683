#include "service/tenant_info.h"

namespace kvs {

void FillTenantInfo(const Principal& caller, const TenantUsage* usage, kvsession::v1::TenantInfo* out) {
  out->set_tenant(caller.tenant);
  out->set_role(caller.is_admin() ? "admin" : "user");
  if (usage == nullptr) return;
  const TenantUsageFigures u = usage->Usage(caller.tenant);
  const QuotaLimits l = usage->quotas().Limits(caller.tenant);
  auto set = [&](Quota q, kvsession::v1::QuotaUsage* field) {
    field->set_usage(u.get(q));
    field->set_limit(l.get(q));
  };
  set(Quota::kSessions, out->mutable_sessions());
  set(Quota::kKvBytes, out->mutable_kv_bytes());
  set(Quota::kStoreBytes, out->mutable_store_bytes());
  set(Quota::kGenerates, out->mutable_generates());
  set(Quota::kCheckpoints, out->mutable_checkpoints());
}

}  // namespace kvs
