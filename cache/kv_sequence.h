// KvSequence: one sequence's KV cache, a page table plus a length.
//
// Positions [0, length) hold K/V for the sequence's tokens; position p lives
// in page_table[p / T] at slot p % T. Pages are shared between sequences by
// reference count:
//   - Fork() gives a new sequence that references every page of this one
//     (no KV bytes are copied, whatever the length);
//   - before a sequence writes into a page another sequence also references
//     (the partially filled last page after a fork or a truncate), it
//     copies that page first (copy-on-write), so writes never change what
//     another sequence sees.
//
// Writing protocol (the caller of Transformer::Forward reserves; Forward
// checks the reservation, writes and commits):
//   PrepareAppend(n)   make positions [length, length + n) writable
//   ... write K/V through slot pointers for those positions ...
//   CommitAppend(n)    length += n
//
// Ownership: a KvSequence owns one reference to each page in its table and
// releases them when destroyed, truncated or cleared. Its references are
// its PageOwner's (PagePool's "Owners": a tenant's, for the service), and
// so are its forks'. It is not thread-safe; the caller serialises use of
// one sequence (the pool itself is thread-safe, so different sequences may
// be used from different threads), except shared_page_count(), which any
// thread may read.
#ifndef KVSESSION_CACHE_KV_SEQUENCE_H_
#define KVSESSION_CACHE_KV_SEQUENCE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "cache/page_pool.h"

namespace kvs {

class KvSequence {
 public:
  explicit KvSequence(PagePool* pool, PageOwner owner = kNoPageOwner)
      : pool_(pool), owner_(owner), page_count_(std::make_shared<std::atomic<int>>(0)) {}
  ~KvSequence() { Clear(); }
  KvSequence(KvSequence&& other) noexcept;
  KvSequence& operator=(KvSequence&& other) noexcept;
  KvSequence(const KvSequence&) = delete;
  KvSequence& operator=(const KvSequence&) = delete;

  PagePool* pool() const { return pool_; }
  PageOwner owner() const { return owner_; }
  const KvGeometry& geometry() const { return pool_->geometry(); }
  int length() const { return length_; }
  const std::vector<PageId>& page_table() const { return pages_; }
  int num_pages() const { return static_cast<int>(pages_.size()); }
  // num_pages() as another thread may read it while this sequence's user
  // changes the table (TenantUsage bounds a running job's growth by it),
  // kept after the sequence is gone or moved from. It never reads low
  // against the pool: pages are taken before the count grows, and the
  // count shrinks before they are released, so the owner's
  // PagesHeldBy + (a bound - this count) never falls below what the
  // sequence will hold at that bound.
  std::shared_ptr<const std::atomic<int>> shared_page_count() const { return page_count_; }

  // Makes positions [length, length + n) writable: allocates the pages they
  // need and gives this sequence its own copy of a page it will write into
  // that is shared or held by the prefix cache (keyed). On RESOURCE_EXHAUSTED nothing visible changes (pages already
  // obtained stay reserved for a later append).
  // `from_reserve`: the pages may come from the pool's reserve (the
  // engine's admitted jobs, PagePool::SetReserved).
  absl::Status PrepareAppend(int n, bool from_reserve = false);
  // Sizes the page table for `length` positions, so appends up to there
  // never reallocate it (the decode loop makes no heap allocation).
  void ReserveTable(int length) {
    pages_.reserve((length + geometry().page_tokens - 1) / geometry().page_tokens);
  }

  // Marks n more positions as written. Requires a successful
  // PrepareAppend covering them.
  void CommitAppend(int n);

  // A new sequence sharing every page of this one.
  KvSequence Fork() const;

  // Keeps positions [0, new_length) and releases whole pages past them.
  void Truncate(int new_length);
  // Releases every page.
  void Clear();

  // Appends a whole page of T positions that another sequence computed (a
  // prefix-cache hit), taking over the caller's reference to it. Requires
  // length() to be a multiple of T; pages reserved past length() by
  // PrepareAppend are released first.
  void AppendPage(PageId page);

  // Adopts `pages` (one reference each, taken for this sequence's owner and
  // transferred to it) as the table for `length` positions, releasing the
  // pages held before. Used by restore (prefix-cache hits go through
  // AppendPage, whose page too must be a reference of the owner's).
  void Adopt(std::vector<PageId> pages, int length);

  // block: the (layer, part, head) block of page `page_index` of the table.
  // slot: the slot of position `pos` inside the block of the page holding it.
  // Neither checks bounds: the page must be in the table (for a write, made
  // writable by PrepareAppend).
  uint8_t* block(int page_index, int layer, KvPart part, int head) const {
    return pool_->data(pages_[page_index]) + geometry().block_offset(layer, part, head);
  }
  uint8_t* slot(int pos, int layer, KvPart part, int head) const {
    const int t = geometry().page_tokens;
    return block(pos / t, layer, part, head) + geometry().slot_offset(pos % t);
  }

 private:
  // page_count_ = n (null after a move: nobody reads it then).
  void PublishPageCount(size_t n) {
    if (page_count_) page_count_->store(static_cast<int>(n), std::memory_order_relaxed);
  }

  PagePool* pool_;
  PageOwner owner_;
  std::vector<PageId> pages_;  // may extend past length_ after PrepareAppend
  int length_ = 0;
  std::shared_ptr<std::atomic<int>> page_count_;  // shared_page_count()
};

}  // namespace kvs

#endif  // KVSESSION_CACHE_KV_SEQUENCE_H_
