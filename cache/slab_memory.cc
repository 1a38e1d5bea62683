#include "cache/slab_memory.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <thread>
#include <vector>

#include "kernels/cpu_features.h"

namespace kvs {
namespace {

constexpr size_t kSlabTargetBytes = size_t{8} << 20;
// How far past the first candidate ChooseSlabShape looks (a bound for
// tiny pages, where the first candidate already wastes nothing).
constexpr int64_t kMaxCandidates = 256;

size_t RoundUpToHugePages(size_t bytes) {
  return (bytes + kSlabHugePageBytes - 1) / kSlabHugePageBytes * kSlabHugePageBytes;
}

// Has the kernel back [memory, memory + bytes) now, for the kernel's
// copies into it (a restore's pread) and the process's own accesses (the
// checksum pass after it). MADV_POPULATE_WRITE (Linux 5.14) fills the page
// tables; a write per 4 KiB then touches each page from user space (and
// does the whole job on older kernels), and a readv of /dev/zero, one byte
// per 4 KiB, from the kernel. Under a hypervisor with shadow page tables
// per mode (PVM, measured on a 2-core Zen 5 VM), each mode's first access
// to a page takes a fault of its own, which a restore into a populated page
// would otherwise pay in the kernel's copy and in the user's pass.
// Medians of 7 alternating rounds of the server's restore time of a
// 2,000-token q8_0 session (kvsession_session_restore_duration_seconds;
// docs/performance/zen5.md, "Issue 11's rows on Zen 5" and "Zen 5 again"): the
// user-space touch took it from 51.6 to 47.7 ms, the kernel's
// (bench/ab_restore.py) from 44.4 to 39.9 (default pool) and 47.6 to 42.1
// (--kv-prefault). The kernel's touch cost that VM 0.1-0.5 s per GiB of
// pool at startup with --kv-prefault; elsewhere it writes a byte per page.
// (Those figures predate whole-huge-page slabs, which removed most of what
// was left: slab_memory.h.)
// False if the kernel has not the memory (ENOMEM).
bool Populate(uint8_t* memory, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  if (::madvise(memory, bytes, MADV_POPULATE_WRITE) != 0 && errno == ENOMEM) return false;
#endif
  volatile uint8_t* p = memory;
  for (size_t at = 0; at < bytes; at += 4096) p[at] = 0;
  const int zero = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
  if (zero >= 0) {
    iovec pages[IOV_MAX];
    for (size_t at = 0; at < bytes;) {
      int n = 0;
      for (; n < IOV_MAX && at < bytes; ++n, at += 4096) pages[n] = {memory + at, 1};
      if (::readv(zero, pages, n) <= 0) break;
    }
    ::close(zero);
  }
  return true;
}

}  // namespace

SlabShape ChooseSlabShape(size_t page_bytes, int64_t max_pages) {
  const int64_t first = std::max<int64_t>(1, static_cast<int64_t>(kSlabTargetBytes / page_bytes));
  const int64_t last = std::min(2 * first, first + kMaxCandidates);
  int64_t best = first;
  // Waste as a share of the mapping, compared without division:
  // waste_a / mapped_a < waste_b / mapped_b.
  size_t best_mapped = RoundUpToHugePages(first * page_bytes);
  size_t best_waste = best_mapped - first * page_bytes;
  for (int64_t n = first + 1; n <= last && best_waste > 0; ++n) {
    const size_t used = static_cast<size_t>(n) * page_bytes;
    const size_t mapped = RoundUpToHugePages(used);
    const size_t waste = mapped - used;
    if (static_cast<unsigned __int128>(waste) * best_mapped <
        static_cast<unsigned __int128>(best_waste) * mapped) {
      best = n;
      best_mapped = mapped;
      best_waste = waste;
    }
  }
  const int64_t pages = std::min(best, std::max<int64_t>(1, max_pages));
  return {.pages = static_cast<int>(pages),
          .mapped_bytes = RoundUpToHugePages(static_cast<size_t>(pages) * page_bytes)};
}

uint8_t* MapAlignedToHugePages(size_t bytes) {
  constexpr size_t kSmallPage = 4096;
  if (bytes == 0 || bytes > SIZE_MAX - 2 * kSlabHugePageBytes) return nullptr;
  bytes = (bytes + kSmallPage - 1) / kSmallPage * kSmallPage;
  // Over-map by one huge page, then return the unaligned head and the
  // tail past `bytes`.
  const size_t over = bytes + kSlabHugePageBytes;
  void* m = ::mmap(nullptr, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const uintptr_t raw = reinterpret_cast<uintptr_t>(m);
  const uintptr_t aligned = (raw + kSlabHugePageBytes - 1) & ~(uintptr_t{kSlabHugePageBytes} - 1);
  if (aligned > raw) ::munmap(m, aligned - raw);
  const uintptr_t end = raw + over;
  if (end > aligned + bytes) ::munmap(reinterpret_cast<void*>(aligned + bytes), end - aligned - bytes);
  // Advice only: without transparent huge pages the memory is small pages.
  ::madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<uint8_t*>(aligned);
}

uint8_t* MapSlab(size_t mapped_bytes, bool populate) {
  // Attention walks a (layer, head) block per KV page, a page apart, so
  // small pages cost a TLB miss per block.
  uint8_t* slab = MapAlignedToHugePages(mapped_bytes);
  if (slab != nullptr && populate && !Populate(slab, mapped_bytes)) {
    UnmapSlab(slab, mapped_bytes);
    return nullptr;
  }
  return slab;
}

void UnmapSlab(uint8_t* memory, size_t mapped_bytes) { ::munmap(memory, mapped_bytes); }

int RunOnEveryCore(absl::FunctionRef<void(int thread)> work) {
  const int n = std::clamp(AvailableCores(), 1, kMaxFillThreads);
  std::vector<std::thread> helpers;
  helpers.reserve(n - 1);
  for (int t = 1; t < n; ++t) helpers.emplace_back([&work, t] { work(t); });
  work(0);
  for (std::thread& h : helpers) h.join();
  return n;
}

}  // namespace kvs
