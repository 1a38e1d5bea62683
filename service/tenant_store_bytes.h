// TenantStoreBytes: the bytes the store holds for each tenant, kept up to
// date as records come and go, so a store-quota check costs a map lookup
// instead of a walk over the tenant's records (tenant_usage.h).
//
// A tenant's figure is what TenantUsage defines as store_bytes, without
// running jobs' reservations: each of its records' encoded size, plus each
// distinct page hash its records reference at its encoded size
// (EncodedPageBytes of the tokens that page holds in the record that
// first referenced it; pages are content-addressed, and a hash names the
// same bytes in every record).
//
// Structures:
//   tenants_[owner].pages   page hash -> {records referencing it, its bytes}
//   tenants_[owner].bytes   the tenant's record bytes + its pages' bytes
// A tenant's entry goes when its last record does.
//
// The caller pairs every Add with a Remove of the same figures (the
// SessionRegistry does, under its mutex, as sessions are indexed, marked
// persisted and removed, and as checkpoints come and go). Not thread-safe.
#ifndef KVSESSION_SERVICE_TENANT_STORE_BYTES_H_
#define KVSESSION_SERVICE_TENANT_STORE_BYTES_H_

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>

#include "cache/page_codec.h"
#include "cache/page_hash.h"

namespace kvs {

// One stored record as the ledger counts it.
struct StoredRecordFigures {
  int64_t record_bytes = 0;
  int kv_length = 0;                  // positions its pages hold
  std::span<const PageHash> pages;    // in order; page i holds PageTokensAt(i)
};

class TenantStoreBytes {
 public:
  explicit TenantStoreBytes(const KvGeometry& geometry) : geometry_(geometry) {}

  void Add(const std::string& tenant, const StoredRecordFigures& record);
  // Takes back what Add(tenant, record) counted.
  void Remove(const std::string& tenant, const StoredRecordFigures& record);
  // 0 for a tenant with no record.
  int64_t bytes(const std::string& tenant) const;

 private:
  struct PageRefs {
    int64_t records = 0;
    int64_t bytes = 0;
  };
  struct HashOfPage {
    size_t operator()(const PageHash& h) const;
  };
  struct SamePage {
    bool operator()(const PageHash& a, const PageHash& b) const { return a.bytes == b.bytes; }
  };
  struct Tenant {
    std::unordered_map<PageHash, PageRefs, HashOfPage, SamePage> pages;
    int64_t bytes = 0;
    int64_t records = 0;
  };

  const KvGeometry geometry_;
  std::unordered_map<std::string, Tenant> tenants_;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_TENANT_STORE_BYTES_H_
