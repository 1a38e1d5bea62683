// PageOwners: the PageOwner number of each tenant, under which the page
// pool counts the pages a tenant's KV holds (cache/page_pool.h, "Owners";
// TenantUsage reads a tenant's kv_bytes from that count). Numbers start at
// 1 (0 is kNoPageOwner), are given on a name's first use and never reused
// or forgotten: one per tenant name the server has seen, and tenants are
// the server's configured ones (auth/) or the owners of stored sessions,
// so the table stays small.
//
// Thread-safe.
#ifndef KVSESSION_SERVICE_PAGE_OWNERS_H_
#define KVSESSION_SERVICE_PAGE_OWNERS_H_

#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "cache/page_pool.h"

namespace kvs {

class PageOwners {
 public:
  // `tenant`'s number, given now if it has none.
  PageOwner Of(const std::string& tenant);
  // `tenant`'s number, or nullopt when it has none yet (it holds no page).
  std::optional<PageOwner> Find(const std::string& tenant) const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, PageOwner> numbers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_PAGE_OWNERS_H_
