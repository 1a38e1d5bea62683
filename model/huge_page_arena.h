// HugePageArena: one anonymous mapping for data that is streamed from
// memory on every token (the packed weight matrices), laid out in the
// order it is read and backed by 2 MiB pages where the kernel allows.
//
// Why: a decode step reads every weight once, in order. On 4 KiB pages
// that is a TLB miss per 4 KiB and a hardware-prefetch stream that stops
// at every page boundary; small allocations from the heap cannot be given
// huge pages at all (madvise needs page-aligned ranges, and the heap's
// pieces are not 2 MiB-aligned).
//
// Contract: Reserve(total) maps `total` bytes (rounded up to 2 MiB),
// 2 MiB-aligned, advised MADV_HUGEPAGE; it returns false (and maps
// nothing) when the mapping fails. Take(bytes) hands out the next
// 64-byte-aligned slice, or nullptr when the reservation cannot hold it.
// Memory is zero until written and lives until the arena is destroyed.
// Whether the kernel actually uses huge pages depends on its
// transparent-huge-page setting ("madvise" or "always"); without them the
// arena still works, on small pages.
//
// Thread safety: none; fill it before readers start. Not copyable.
#ifndef KVSESSION_MODEL_HUGE_PAGE_ARENA_H_
#define KVSESSION_MODEL_HUGE_PAGE_ARENA_H_

#include <cstddef>
#include <cstdint>

namespace kvs {

class HugePageArena {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;

  HugePageArena() = default;
  ~HugePageArena();
  HugePageArena(const HugePageArena&) = delete;
  HugePageArena& operator=(const HugePageArena&) = delete;

  // Maps the arena; at most once. False if already reserved or mmap fails.
  bool Reserve(size_t total);
  // The next `bytes` (64-byte aligned start), or nullptr if they do not fit.
  uint8_t* Take(size_t bytes);

  size_t capacity() const { return capacity_; }
  size_t used() const { return used_; }

 private:
  void* mapping_ = nullptr;  // what munmap gets back
  size_t mapping_bytes_ = 0;
  uint8_t* base_ = nullptr;  // 2 MiB-aligned start inside the mapping
  size_t capacity_ = 0;
  size_t used_ = 0;
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_HUGE_PAGE_ARENA_H_
