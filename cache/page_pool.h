// PagePool: fixed-size KV pages with reference counts, under a page budget.
//
// Holds:
//   - slabs of page memory, allocated lazily (a slab is never returned to
//     the system while the pool lives) and never moved, so a page's address
//     is stable;
//   - a reference count per page (0 = free);
//   - the prefix cache: content key -> page for full pages whose content is
//     identified (a chain hash of the tokens that produced them, see
//     cache/page_hash.h). A keyed page keeps its key after its last
//     reference is released, so a later sequence with the same prefix can
//     take it back (LookupKey) instead of recomputing it;
//   - two free lists: pages without a key, reused first in LIFO order (the
//     warmest in cache), then keyed pages in least-recently-freed order
//     (reusing one evicts its key).
//
// Contract: Allocate() hands out a page with one reference, or
// RESOURCE_EXHAUSTED when `max_pages` pages are in use. A keyed page's
// contents never change (KvSequence copies before writing into one). Page
// contents are not cleared; writers only read what they wrote.
//
// Thread safety: Allocate/AddRef/Release/Stats are safe from any thread.
// data() is lock-free; writing a page's bytes is the business of the single
// owner that holds its only reference (see KvSequence's copy-on-write).
#ifndef KVSESSION_CACHE_PAGE_POOL_H_
#define KVSESSION_CACHE_PAGE_POOL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cache/kv_geometry.h"

namespace kvs {

using PageId = int32_t;
// Content key of a full page (16 bytes of a chain hash).
using PageKey = std::array<uint8_t, 16>;

struct PagePoolStats {
  int64_t page_bytes = 0;
  int64_t max_pages = 0;
  int64_t pages_in_use = 0;     // pages with at least one reference
  int64_t pages_shared = 0;     // pages with more than one reference
  int64_t page_references = 0;  // sum of reference counts (pages as seen by sequences)
  int64_t pages_cached = 0;     // free pages that still hold a keyed prefix
  int64_t pages_reserved = 0;   // free pages set aside for running jobs
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

  // Maps and touches the whole pool now (--kv-prefault), as llama.cpp
  // allocates and clears its KV buffer at startup: later allocations (a
  // restore, a prefill) never wait for the kernel to supply and zero fresh
  // memory, which costs as much as reading the KV back (230 MB: ~40 ms on
  // bare metal, up to 1 s on a VM whose host backs memory on first touch).
  // The pool's whole budget becomes resident. RESOURCE_EXHAUSTED if the
  // memory cannot be mapped (the slabs mapped so far stay).
  absl::Status Prefault();
  // A fresh page with reference count 1, or RESOURCE_EXHAUSTED. Pages set
  // aside by SetReserved are only for callers that pass from_reserve (the
  // engine's running jobs); others see them as in use.
  absl::StatusOr<PageId> Allocate(bool from_reserve = false);
  // Sets aside `pages` free pages for from_reserve allocations (the engine
  // sets what its admitted jobs may still need). On error nothing changes.
  void SetReserved(int64_t pages);
  int64_t reserved() const;
  void AddRef(PageId page);
  // Drops one reference; the page is free when none remain.
  void Release(PageId page);
  int ref_count(PageId page) const;

  // Prefix cache. SetKey marks a full page's content (no-op when another
  // page already holds that key). LookupKey returns a new reference to the
  // page holding `key` (reviving it from the free list), or nullopt.
  void SetKey(PageId page, const PageKey& key);
  std::optional<PageId> LookupKey(const PageKey& key);
  bool has_key(PageId page) const;
  // If `page` has exactly one reference (the caller's), removes its key, so
  // LookupKey can no longer hand it out and its owner may change it in
  // place (model/kv_slide.h), and returns true; otherwise changes nothing
  // and returns false. One atomic step under the pool's lock.
  bool TakeSole(PageId page);

  uint8_t* data(PageId page) const {
    return slabs_[page / pages_per_slab_] +
           static_cast<size_t>(page % pages_per_slab_) * geometry_.page_bytes();
  }

  PagePoolStats Stats() const;

 private:
  // Maps the next slab (touching it if `populate`) and frees its pages.
  absl::Status MapSlab(bool populate) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LruRemove(PageId page) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LruPushBack(PageId page) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const KvGeometry geometry_;
  const int64_t max_pages_;
  const int pages_per_slab_;
  // Sized once to the maximum slab count so data() can read it without the
  // lock while slabs are added.
  std::vector<uint8_t*> slabs_;

  mutable absl::Mutex mu_;
  int64_t n_slabs_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int32_t> ref_counts_ ABSL_GUARDED_BY(mu_);
  std::vector<PageId> free_ ABSL_GUARDED_BY(mu_);  // unkeyed free pages, LIFO
  // Keyed free pages in an intrusive doubly linked list, oldest first.
  std::vector<PageId> lru_prev_ ABSL_GUARDED_BY(mu_);
  std::vector<PageId> lru_next_ ABSL_GUARDED_BY(mu_);
  PageId lru_head_ ABSL_GUARDED_BY(mu_) = -1;
  PageId lru_tail_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t cached_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::optional<PageKey>> keys_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<PageKey, PageId> key_index_ ABSL_GUARDED_BY(mu_);
  int64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t shared_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t references_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kvs

#endif  // KVSESSION_CACHE_PAGE_POOL_H_
