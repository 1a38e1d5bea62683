#include "model/huge_page_arena.h"

#include <sys/mman.h>

namespace kvs {

HugePageArena::~HugePageArena() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
}

bool HugePageArena::Reserve(size_t total) {
  if (mapping_ != nullptr || total == 0) return false;
  const size_t capacity = (total + kHugePage - 1) / kHugePage * kHugePage;
  // One huge page extra, so a 2 MiB-aligned start lies inside the mapping.
  const size_t bytes = capacity + kHugePage;
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  const uintptr_t start = (reinterpret_cast<uintptr_t>(m) + kHugePage - 1) & ~(kHugePage - 1);
  // Advice only: without transparent huge pages the arena runs on small ones.
  ::madvise(reinterpret_cast<void*>(start), capacity, MADV_HUGEPAGE);
  mapping_ = m;
  mapping_bytes_ = bytes;
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
