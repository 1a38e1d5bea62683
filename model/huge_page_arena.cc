#include "model/huge_page_arena.h"

#include <sys/mman.h>

namespace kvs {

HugePageArena::~HugePageArena() {
  if (base_ != nullptr) ::munmap(base_, capacity_);
}

bool HugePageArena::Reserve(size_t total) {
  constexpr size_t kPage = 4096;
  if (base_ != nullptr || total == 0) return false;
  const size_t capacity = (total + kPage - 1) / kPage * kPage;
  // Map a huge page more than needed, then unmap what lies before the
  // first 2 MiB boundary and after the capacity.
  const size_t bytes = capacity + kHugePage;
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(m);
  const uintptr_t start = (lo + kHugePage - 1) & ~(kHugePage - 1);
  if (start > lo) ::munmap(m, start - lo);
  if (lo + bytes > start + capacity) ::munmap(reinterpret_cast<void*>(start + capacity), lo + bytes - start - capacity);
  // Advice only: without transparent huge pages the arena runs on small ones.
  ::madvise(reinterpret_cast<void*>(start), capacity, MADV_HUGEPAGE);
  base_ = reinterpret_cast<uint8_t*>(start);
  capacity_ = capacity;
  used_ = 0;
  return true;
}

uint8_t* HugePageArena::Take(size_t bytes) {
  const size_t at = (used_ + 63) / 64 * 64;
  if (base_ == nullptr || at > capacity_ || bytes > capacity_ - at) return nullptr;
  used_ = at + bytes;
  return base_ + at;
}

}  // namespace kvs
