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
// Memory: slabs are mapped lazily by Allocate, or ahead of use by
// KeepWarm (a background thread keeps that many free pages mapped and
// resident) and Prefault (the whole budget, now). Each slab is whole,
// aligned huge pages (cache/slab_memory.h), so the kernel can back every
// page with huge pages; the last slab of a budget that is not a whole
// number of slabs is only its pages rounded up to a huge page, not a
// whole slab.
//
// Contract: Allocate() hands out a page with one reference, or
// RESOURCE_EXHAUSTED when `max_pages` pages are in use. A keyed page's
// contents never change (KvSequence copies before writing into one). Page
// contents are not cleared; writers only read what they wrote.
//
// Owners: every reference is taken and dropped for an owner (a PageOwner:
// the service numbers its tenants, see service/page_owners.h; callers that
// count nothing pass kNoPageOwner), and the pool keeps, per owner, how many
// pages hold at least one of its references (PagesHeldBy), so a tenant's
// KV in RAM is known without walking its sessions. A page's references
// usually have one owner (the service salts prefix keys per tenant); with
// several (a prefix cache shared across tenants) the page counts once for
// each. A reference must be dropped for the owner it was taken for.
//
// Thread safety: every method is safe from any thread.
// data() is lock-free; writing a page's bytes is the business of the single
// owner that holds its only reference (see KvSequence's copy-on-write).
#ifndef KVSESSION_CACHE_PAGE_POOL_H_
#define KVSESSION_CACHE_PAGE_POOL_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cache/kv_geometry.h"
#include "cache/slab_memory.h"

namespace kvs {

using PageId = int32_t;
// Whose a page reference is (see "Owners" above); ids are small and dense.
using PageOwner = int32_t;
inline constexpr PageOwner kNoPageOwner = 0;
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
  int64_t pages_mapped = 0;     // pages in slabs mapped so far (used, cached or free)
  // Free pages kept mapped ahead of use: KeepWarm's number (capped by the
  // budget), max_pages after Prefault, 0 when pages are mapped on demand.
  int64_t pages_warm_target = 0;
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
  // The pool's whole budget becomes resident, mapped on every core
  // (WarmUpOnEveryCore). RESOURCE_EXHAUSTED if the
  // memory cannot be mapped (the slabs mapped so far stay).
  absl::Status Prefault();
  // Keeps at least `pages` free pages (capped by what is left of the
  // budget) mapped and resident ahead of Allocate, so a restore or a
  // prefill of up to that many pages never waits for the kernel to supply
  // fresh memory, while an idle pool holds only that much beyond its pages
  // in use. Maps them now, before returning (on every core:
  // WarmUpOnEveryCore), then from a background thread
  // (SCHED_IDLE, stopped by the destructor) 50 ms after allocations take
  // them. A later call changes the number. RESOURCE_EXHAUSTED if the
  // memory cannot be mapped now (the slabs mapped so far stay); if it
  // cannot be mapped later, the thread stops warming and Allocate maps
  // lazily, as without KeepWarm.
  absl::Status KeepWarm(int64_t pages);
  // While one lives, KeepWarm's thread maps nothing (it stops within a slab
  // of the pause): a restore holds one while it copies a session into the
  // pool, since zeroing fresh memory beside those copies would take the
  // memory bandwidth they need. Pauses from any threads nest. The pool
  // must outlive it.
  class WarmingPause {
   public:
    explicit WarmingPause(PagePool* pool);
    ~WarmingPause();
    WarmingPause(const WarmingPause&) = delete;
    WarmingPause& operator=(const WarmingPause&) = delete;

   private:
    PagePool* const pool_;
  };
  // A fresh page with reference count 1, or RESOURCE_EXHAUSTED. Pages set
  // aside by SetReserved are only for callers that pass from_reserve (the
  // engine's running jobs); others see them as in use.
  absl::StatusOr<PageId> Allocate(bool from_reserve = false, PageOwner owner = kNoPageOwner);
  // A page for each entry of `keys`, taken in one step under the pool's
  // lock, all or none (a stored session's pages as a restore loads them):
  // for a key some page holds, that page with a new reference
  // ((*found)[i] true; a free one is revived from the prefix cache); for
  // nullopt or a key no page holds, a fresh page with one reference
  // ((*found)[i] false). Every key found is taken before any fresh page,
  // so the call never evicts a key it asks for. Room taken: the fresh
  // pages and the revived free ones (a page already referenced, or asked
  // for twice, takes none once held).
  // `room_needed`, if not null, is set to that room (as counted under the
  // lock, before anything is taken), also on failure: what to ask a
  // room-maker for before trying again.
  // RESOURCE_EXHAUSTED, with nothing changed and no room given back, when
  // that room is more than the pool has outside the reserve, or when
  // memory cannot be mapped (the slabs the fresh pages need are mapped
  // before any page is taken, so the cached pages keep their places in the
  // eviction order; slabs mapped before the one refused stay mapped, as
  // free pages). So two calls racing for the last room never both take
  // part of it and both fail.
  // Every reference is taken for `owner`.
  absl::Status TakePages(std::span<const std::optional<PageKey>> keys, std::vector<PageId>* pages,
                         std::vector<bool>* found, int64_t* room_needed = nullptr,
                         PageOwner owner = kNoPageOwner);
  // Sets aside `pages` free pages for from_reserve allocations (the engine
  // sets what its admitted jobs may still need). On error nothing changes.
  void SetReserved(int64_t pages);
  int64_t reserved() const;
  // The next `pages` pages that become free go straight into the reserve,
  // in the same step under the pool's lock, so no caller without
  // from_reserve can take one between its release and a SetReserved (the
  // engine: what a running job's slide frees is the job's to grow back
  // into). SetReserved ends it.
  void ReserveNextFreed(int64_t pages);
  void AddRef(PageId page, PageOwner owner = kNoPageOwner);
  // Drops one reference of `owner`'s; the page is free when none remain.
  // True when this gave room back (room_given_back() grew by one).
  bool Release(PageId page, PageOwner owner = kNoPageOwner);
  // Pages holding at least one reference of `owner`'s: O(1).
  int64_t PagesHeldBy(PageOwner owner) const;
  // How many times room has been given back so far: a page freed by its
  // last Release (and not taken by ReserveNextFreed), the reserve made
  // smaller, or a holder of pages that became able to give them up
  // (NoteRoomMayBeMade). For AwaitRoomGivenBack and the room callback.
  int64_t room_given_back() const;
  // Waits until room_given_back() differs from `seen` (what the caller read
  // before its Allocate found the pool full) or `deadline` passes; true in
  // the first case. A caller that needs room waits here instead of polling.
  bool AwaitRoomGivenBack(int64_t seen, absl::Time deadline) const;
  // Callers inside AwaitRoomGivenBack now (for tests and metrics).
  int room_waiters() const;
  // Counts as room given back without a page freed: pages are held by
  // something that could now give them up on request (the session registry
  // calls it when a session becomes idle and clean, which MakeRoom may
  // evict). Wakes the waiters, who try again.
  void NoteRoomMayBeMade();
  // Called each time room_given_back() grows, on the thread that gave the
  // room back, with the pool's lock held: it must be quick, must not call
  // into the pool, and may take only a lock that is never held while
  // calling out (a leaf). One callback at a time (the engine's); an empty
  // one removes it.
  void SetRoomGivenBackCallback(std::function<void()> callback);
  int ref_count(PageId page) const;

  // Prefix cache. SetKey marks a full page's content (no-op when another
  // page already holds that key). LookupKey returns a new reference to the
  // page holding `key` (reviving it from the free list), or nullopt. A
  // page revived from the free list is a page taken as Allocate takes one:
  // nullopt when only reserved pages are left, unless from_reserve.
  void SetKey(PageId page, const PageKey& key);
  std::optional<PageId> LookupKey(const PageKey& key, bool from_reserve = false,
                                  PageOwner owner = kNoPageOwner);
  // True when a page holds `key` and has references: LookupKey would share
  // it and take no room (a keyed free page takes room as it is revived).
  bool KeyReferenced(const PageKey& key) const;
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
  // The length of slab `slab`'s mapping: slab_shape_.mapped_bytes, or for
  // a last slab of fewer pages, those pages rounded up to huge pages.
  size_t SlabBytes(int64_t slab) const;
  // Maps `bytes` of slab memory (SlabBytes of the slab it is for), backed
  // now if `populate`; nullptr if it cannot be mapped. Needs no lock.
  uint8_t* MapSlabMemory(size_t bytes, bool populate) const;
  // Installs `memory`, `bytes` long (at least SlabBytes of the next slab:
  // slabs only get shorter), as the next slab and frees its pages, giving
  // back what is longer than that slab needs; unmaps it instead when
  // every slab is already installed.
  void InstallSlab(uint8_t* memory, size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Maps, populates and installs slabs until WarmingNeeded() is false (or,
  // for the background thread, a WarmingPause begins), the populating
  // outside the lock. RESOURCE_EXHAUSTED if a slab cannot be mapped.
  absl::Status WarmUp(bool background) ABSL_LOCKS_EXCLUDED(mu_);
  // WarmUp(false) on this thread and on one more per core (up to 8 in
  // all: RunOnEveryCore), together: most of a slab's populating is the kernel supplying
  // fresh memory, which scales with cores (512 MiB on a 2-core VM whose
  // host backs memory on first touch: 1.0 s on one thread, 0.6 s on two).
  // Each slab one thread maps counts toward the target from the start
  // (slabs_warming_), so no more is warmed than on one thread. The first
  // error, once every thread is done.
  absl::Status WarmUpOnEveryCore() ABSL_LOCKS_EXCLUDED(mu_);
  // Fewer than warm_pages_ unkeyed free pages are mapped or being mapped by
  // WarmUp, and slabs remain.
  bool WarmingNeeded() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool WarmerHasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // KeepWarm's background thread: WarmUp whenever allocations need it.
  void WarmLoop();
  // Allocate's page taking, once the budget allows it: an unkeyed free
  // page, else one of a new slab (mapped now), else, with every slab
  // mapped, the least recently freed cached one (its key evicted);
  // RESOURCE_EXHAUSTED when none is left or a slab cannot be mapped. Sets
  // the page's count to 1.
  absl::StatusOr<PageId> TakeFreePage(PageOwner owner) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Maps and installs the next slab: false (nothing changed) if the kernel
  // refuses the mapping. Call only while slabs remain.
  bool MapNextSlab() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One more reference to a keyed page: shared if it has references,
  // revived from the cache if not (the caller checked the budget).
  void TakeKeyed(PageId page, PageOwner owner) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops one reference the calling method took (no room given back: the
  // caller gives back only what it took in the same locked step).
  void UndoTake(PageId page, PageOwner owner) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The owners' side of a reference to `page` taken or dropped (its count
  // already changed): `first` / `last` when it was the page's first
  // reference or its last.
  void CountOwnerTaken(PageId page, PageOwner owner, bool first) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountOwnerDropped(PageId page, PageOwner owner, bool last) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // held_by_[owner] += delta, growing the table for a new owner.
  void AddHeld(PageOwner owner, int64_t delta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ++room_given_back_, and the callback.
  void GiveRoomBack() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LruRemove(PageId page) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LruPushBack(PageId page) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const KvGeometry geometry_;
  const int64_t max_pages_;
  const SlabShape slab_shape_;  // pages per slab, and each slab's mapping (cache/slab_memory.h)
  const int pages_per_slab_;    // slab_shape_.pages, for data()
  // Sized once to the maximum slab count so data() can read it without the
  // lock while slabs are added.
  std::vector<uint8_t*> slabs_;
  std::vector<size_t> slab_bytes_ ABSL_GUARDED_BY(mu_);  // each installed slab's mapping length

  mutable absl::Mutex mu_;
  int64_t n_slabs_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t slabs_warming_ ABSL_GUARDED_BY(mu_) = 0;  // mapped by WarmUp calls, not installed yet
  int64_t room_given_back_ ABSL_GUARDED_BY(mu_) = 0;
  mutable int room_waiters_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> room_given_back_callback_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> ref_counts_ ABSL_GUARDED_BY(mu_);
  std::vector<PageId> free_ ABSL_GUARDED_BY(mu_);  // unkeyed free pages, LIFO
  // Keyed free pages in an intrusive doubly linked list, oldest first.
  std::vector<PageId> lru_prev_ ABSL_GUARDED_BY(mu_);
  std::vector<PageId> lru_next_ ABSL_GUARDED_BY(mu_);
  PageId lru_head_ ABSL_GUARDED_BY(mu_) = -1;
  PageId lru_tail_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t cached_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::optional<PageKey>> keys_ ABSL_GUARDED_BY(mu_);
  // The owner of every reference of a page whose references have one
  // owner; pages with references of several owners are in mixed_owners_
  // instead, with each owner's reference count (summing to the page's).
  std::vector<PageOwner> owner_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<PageId, std::vector<std::pair<PageOwner, int32_t>>> mixed_owners_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> held_by_ ABSL_GUARDED_BY(mu_);  // PagesHeldBy, by owner
  absl::flat_hash_map<PageKey, PageId> key_index_ ABSL_GUARDED_BY(mu_);
  int64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reserve_next_freed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t shared_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t references_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t warm_pages_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int warming_pauses_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread warm_thread_;  // started by the first KeepWarm
};

}  // namespace kvs

#endif  // KVSESSION_CACHE_PAGE_POOL_H_
