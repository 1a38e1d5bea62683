// GetServerInfo's TenantInfo: the caller's tenant, role, and its usage of
// each quota against the limit (tenant_usage.h; limit 0 = unlimited).
// Without a TenantUsage only the tenant and role are set. Thread-safe
// (reads TenantUsage).
#ifndef KVSESSION_SERVICE_TENANT_INFO_H_
#define KVSESSION_SERVICE_TENANT_INFO_H_

#include "kvsession/v1/kvsession.pb.h"
#include "service/auth/principal.h"
#include "service/tenant_usage.h"

namespace kvs {

void FillTenantInfo(const Principal& caller, const TenantUsage* usage, kvsession::v1::TenantInfo* out);

}  // namespace kvs

#endif  // KVSESSION_SERVICE_TENANT_INFO_H_
