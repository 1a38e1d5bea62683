// Reference recounts of what TenantUsage keeps, for tests and benches; not
// used by the server.
//
// The reference recount of a tenant's store bytes: every record it owns
// walked from scratch, each record's encoded size plus each distinct page
// hash once at its encoded size, exactly as TenantUsage counted them on
// every call before the registry kept them (TenantStoreBytes). Tests hold
// the kept figure to it (tenant_usage_test.cc); kvs-bench-tenants times it
// beside the kept one. Not used by the server.
//
// Takes the registry's mutex (SessionRegistry::ForEachOwnedBy).
#ifndef KVSESSION_SERVICE_TENANT_USAGE_RECOUNT_H_
#define KVSESSION_SERVICE_TENANT_USAGE_RECOUNT_H_

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cache/page_codec.h"
#include "service/session_manager.h"

namespace kvs {

inline int64_t RecountStoreBytes(SessionManager& m, const std::string& tenant) {
  const KvGeometry& g = m.record_context().geometry;
  std::set<std::string_view> seen;  // views of hashes held by the records, under the mutex
  int64_t bytes = 0;
  auto page = [&](std::string_view hash, int kv_length, int i) {
    if (seen.insert(hash).second) bytes += static_cast<int64_t>(EncodedPageBytes(g, PageTokensAt(g, kv_length, i)));
  };
  m.registry()->ForEachOwnedBy(
      tenant,
      [&](const Session& s) {
        if (s.version == 0) return;  // never written
        bytes += s.persisted_record_bytes;
        int i = 0;
        for (const PageHash& h : s.persisted_page_hashes) page(h.view(), s.persisted_kv_length, i++);
      },
      [&](const CheckpointRecord& c) {
        bytes += static_cast<int64_t>(c.ByteSizeLong());
        int i = 0;
        for (const std::string& h : c.session().page_hashes()) page(h, c.session().kv_length(), i++);
      });
  return bytes;
}

// The reference recount of a tenant's KV pages: the distinct pool pages in
// the page tables of its resident sessions, as TenantUsage counted them on
// every call before the pool kept the count (PagePool::PagesHeldBy). Reads
// the tables, so only while no other thread changes them (an idle tenant,
// or a test's own thread).
// Counts as that code did: one bit per pool page.
inline int64_t RecountKvPages(SessionManager& m, const std::string& tenant) {
  std::vector<bool> seen(static_cast<size_t>(m.pool()->max_pages()));
  int64_t distinct = 0;
  m.registry()->ForEachOwnedBy(
      tenant,
      [&](const Session& s) {
        if (!s.kv) return;
        for (PageId p : s.kv->page_table()) {
          if (p < 0 || static_cast<size_t>(p) >= seen.size() || seen[p]) continue;
          seen[p] = true;
          ++distinct;
        }
      },
      [](const CheckpointRecord&) {});
  return distinct;
}

}  // namespace kvs

#endif  // KVSESSION_SERVICE_TENANT_USAGE_RECOUNT_H_
