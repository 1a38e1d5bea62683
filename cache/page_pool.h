// PagePool: fixed-size KV pages with reference counts, under a page budget.
//
// Holds:
//   - slabs of page memory, allocated lazily (a slab is never returned to
//     the system while the pool lives) and never moved, so a page's address
//     is stable;
//   - a reference count per page (0 = free);
//   - a free list in LIFO order (the most recently freed page is reused
//     first, it is the warmest in cache).
//
// Contract: Allocate() hands out a page with one reference, or
// RESOURCE_EXHAUSTED when `max_pages` pages are in use. A page returns to
// the free list when its last reference is released. Page contents are not
// cleared; writers only read what they wrote.
//
// Thread safety: Allocate/AddRef/Release/Stats are safe from any thread.
// data() is lock-free; writing a page's bytes is the business of the single
// owner that holds its only reference (see KvSequence's copy-on-write).
#ifndef KVSESSION_CACHE_PAGE_POOL_H_
#define KVSESSION_CACHE_PAGE_POOL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cache/kv_geometry.h"

namespace kvs {

using PageId = int32_t;

struct PagePoolStats {
  int64_t page_bytes = 0;
  int64_t max_pages = 0;
  int64_t pages_in_use = 0;     // pages with at least one reference
  int64_t pages_shared = 0;     // pages with more than one reference
  int64_t page_references = 0;  // sum of reference counts (pages as seen by sequences)
  int64_t bytes_in_use() const { return pages_in_use * page_bytes; }
  // Bytes that sharing saves: what separate copies would have cost.
  int64_t bytes_saved_by_sharing() const { return (page_references - pages_in_use) * page_bytes; }
};

class PagePool {
 public:
  PagePool(const KvGeometry& geometry, int64_t max_pages);
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  const KvGeometry& geometry() const { return geometry_; }
  int64_t max_pages() const { return max_pages_; }

  // A fresh page with reference count 1, or RESOURCE_EXHAUSTED.
  absl::StatusOr<PageId> Allocate();
  void AddRef(PageId page);
  // Drops one reference; the page is free when none remain.
  void Release(PageId page);
  int ref_count(PageId page) const;

  uint8_t* data(PageId page) const {
    return slabs_[page / pages_per_slab_] +
           static_cast<size_t>(page % pages_per_slab_) * geometry_.page_bytes();
  }

  PagePoolStats Stats() const;

 private:
  const KvGeometry geometry_;
  const int64_t max_pages_;
  const int pages_per_slab_;
  // Sized once to the maximum slab count so data() can read it without the
  // lock while slabs are added.
  std::vector<uint8_t*> slabs_;

  mutable absl::Mutex mu_;
  int64_t n_slabs_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int32_t> ref_counts_ ABSL_GUARDED_BY(mu_);
  std::vector<PageId> free_ ABSL_GUARDED_BY(mu_);
  int64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t shared_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t references_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kvs

#endif  // KVSESSION_CACHE_PAGE_POOL_H_
