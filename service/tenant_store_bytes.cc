#include "service/tenant_store_bytes.h"

#include <cstring>

namespace kvs {

size_t TenantStoreBytes::HashOfPage::operator()(const PageHash& h) const {
  size_t v = 0;  // the hash is a cryptographic digest: its first bytes will do
  std::memcpy(&v, h.bytes.data(), sizeof(v));
  return v;
}

void TenantStoreBytes::Add(const std::string& tenant, const StoredRecordFigures& record) {
  Tenant& t = tenants_[tenant];
  ++t.records;
  t.bytes += record.record_bytes;
  int i = 0;
  for (const PageHash& h : record.pages) {
    PageRefs& refs = t.pages[h];
    if (refs.records++ == 0) {
      refs.bytes = static_cast<int64_t>(EncodedPageBytes(geometry_, PageTokensAt(geometry_, record.kv_length, i)));
      t.bytes += refs.bytes;
    }
    ++i;
  }
}

void TenantStoreBytes::Remove(const std::string& tenant, const StoredRecordFigures& record) {
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return;
  Tenant& t = it->second;
  t.bytes -= record.record_bytes;
  for (const PageHash& h : record.pages) {
    auto p = t.pages.find(h);
    if (p == t.pages.end()) continue;
    if (--p->second.records == 0) {
      t.bytes -= p->second.bytes;
      t.pages.erase(p);
    }
  }
  if (--t.records <= 0) tenants_.erase(it);
}

int64_t TenantStoreBytes::bytes(const std::string& tenant) const {
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.bytes;
}

}  // namespace kvs
