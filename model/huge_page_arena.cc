#include "model/huge_page_arena.h"

#include <sys/mman.h>

#include "cache/slab_memory.h"

namespace kvs {

HugePageArena::~HugePageArena() {
  if (base_ != nullptr) ::munmap(base_, capacity_);
}

bool HugePageArena::Reserve(size_t total) {
  constexpr size_t kPage = 4096;
  if (base_ != nullptr || total == 0) return false;
  const size_t capacity = (total + kPage - 1) / kPage * kPage;
  uint8_t* start = MapAlignedToHugePages(capacity);
  if (start == nullptr) return false;
  base_ = start;
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
