// HugePageArena: one anonymous mapping for memory that is streamed on
// every token (the packed weight matrices, in reading order), starting
// on a 2 MiB boundary and advised MADV_HUGEPAGE, so the kernel can back it
// with transparent huge pages.
//
// Why: a decode step reads every weight once, in order. On 4 KiB pages
// that is a TLB miss per 4 KiB and a hardware-prefetch stream that stops
// at every page boundary. Heap
// allocations cannot be given huge pages (madvise needs page-aligned
// ranges, and the heap's pieces are not 2 MiB-aligned), and a plain mmap
// is 2 MiB-aligned only when the kernel chooses to.
//
// Contract: Reserve(total) maps `total` bytes rounded up to 4 KiB, at a
// 2 MiB-aligned address; it returns false (and maps nothing) when already
// reserved, when `total` is 0 or when the mapping fails. Every whole 2 MiB
// of it may be a huge page; a last partial one stays on small pages (no
// memory is spent past `total`'s last 4 KiB). Take(bytes) hands out the
// next 64-byte-aligned slice, or nullptr when the reservation cannot hold
// it. Memory is zero until written and lives until the arena is
// destroyed. Whether the kernel uses huge pages depends on its
// transparent-huge-page setting ("madvise" or "always"); without them the
// arena works on small pages.
//
// Thread safety: none; fill it before readers start. Not copyable.
#ifndef KVSESSION_MODEL_HUGE_PAGE_ARENA_H_
#define KVSESSION_MODEL_HUGE_PAGE_ARENA_H_

#include <cstddef>
#include <cstdint>

#include "cache/slab_memory.h"

namespace kvs {

class HugePageArena {
 public:
  static constexpr size_t kHugePage = kSlabHugePageBytes;  // the mapping is MapAlignedToHugePages's

  HugePageArena() = default;
  ~HugePageArena();
  HugePageArena(const HugePageArena&) = delete;
  HugePageArena& operator=(const HugePageArena&) = delete;

  bool Reserve(size_t total);
  uint8_t* Take(size_t bytes);

  size_t capacity() const { return capacity_; }
  size_t used() const { return used_; }

 private:
  uint8_t* base_ = nullptr;  // 2 MiB-aligned; the whole mapping
  size_t capacity_ = 0;
  size_t used_ = 0;
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_HUGE_PAGE_ARENA_H_
