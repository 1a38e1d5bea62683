// Slab memory: the anonymous mappings a PagePool carves its KV pages from,
// laid out so that huge pages can back every byte of them.
//
// A slab is a whole number of 2 MiB huge pages, aligned to 2 MiB, and
// asked for huge pages (MADV_HUGEPAGE). A mapping that is not aligned, or
// not a whole number of huge pages, keeps its ragged ends in 4 KiB pages:
// with slabs of ~8 MB at 4 KiB alignment that was about 30% of a pool.
// Pages there cost a TLB miss per attention block and, on a hypervisor
// with shadow page tables (PVM, measured on a 2-core Zen 5 VM), several
// microseconds each on the first full pass over them, even after
// Populate's touches: a restore of 2,000 q8_0 tokens into such memory
// took 41 ms to read where memory in huge pages took 13 ms
// (docs/performance/zen5.md, "Restore into huge pages").
//
// ChooseSlabShape picks how many KV pages a slab holds so that rounding
// the slab up to whole huge pages wastes the least.
//
// Contract: pure functions and a mapping the caller owns (UnmapSlab with
// the same byte count). Thread-safe. Where the kernel has no transparent
// huge pages the mapping is 4 KiB pages, as before, and nothing fails.
#ifndef KVSESSION_CACHE_SLAB_MEMORY_H_
#define KVSESSION_CACHE_SLAB_MEMORY_H_

#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"

namespace kvs {

// The huge page size slabs are aligned to and made of (x86-64's PMD size).
inline constexpr size_t kSlabHugePageBytes = size_t{2} << 20;

struct SlabShape {
  int pages = 1;            // KV pages per slab
  size_t mapped_bytes = 0;  // the slab's mapping: pages * page_bytes rounded up to whole huge pages
};

// The shape for pages of `page_bytes` (> 0) in a pool of `max_pages` (>= 1):
// from the most pages that fit 8 MiB (at least 1) up to twice as many (and
// at most 256 more), the count that wastes the smallest share of its
// mapping (the fewest pages on a tie), capped at max_pages. (A pool whose
// budget is not a whole number of slabs maps its last slab shorter:
// PagePool::SlabBytes.)
SlabShape ChooseSlabShape(size_t page_bytes, int64_t max_pages);

// Maps `bytes` (rounded up to 4 KiB) of zeroed, private, anonymous memory
// at a kSlabHugePageBytes-aligned address, advised MADV_HUGEPAGE, so every
// whole 2 MiB of it may be a huge page; nullptr if the address space is
// not there. (Also the model's weight arena, model/huge_page_arena.h.)
// Release it with munmap(memory, bytes).
uint8_t* MapAlignedToHugePages(size_t bytes);

// Maps `mapped_bytes` (a multiple of kSlabHugePageBytes) of zeroed,
// private, anonymous memory at a kSlabHugePageBytes-aligned address, asked
// for huge pages. If `populate`, backs it now and touches every 4 KiB of
// it from user space and from the kernel (see slab_memory.cc). nullptr if
// the address space is not there, or if `populate` and the kernel cannot
// back it (MADV_POPULATE_WRITE's ENOMEM; kernels before 5.14 fault it in
// by the touches, where a shortage is the OOM killer's).
uint8_t* MapSlab(size_t mapped_bytes, bool populate);

// Returns a MapSlab mapping, or its tail from a kSlabHugePageBytes
// boundary on, to the system.
void UnmapSlab(uint8_t* memory, size_t mapped_bytes);

// The most threads RunOnEveryCore uses, the caller's included.
inline constexpr int kMaxFillThreads = 8;

// Runs work(0) on the calling thread and work(1) .. work(n - 1) on threads
// of their own, all at once, where n is the number of cores this process
// may run on (its CPU affinity), at most kMaxFillThreads; returns n once
// every call has returned. For filling fresh memory (a pool's warm slabs,
// the packed weights' arena): most of that is the kernel supplying pages,
// which scales with cores (512 MiB on a 2-core VM whose host backs memory
// on first touch: 1.0 s on one thread, 0.6 s on two). The calls share out
// the work themselves (an atomic cursor, a locked counter). Not for the
// engine's compute, which has its own pool (model/thread_pool.h).
int RunOnEveryCore(absl::FunctionRef<void(int thread)> work);

}  // namespace kvs

#endif  // KVSESSION_CACHE_SLAB_MEMORY_H_
