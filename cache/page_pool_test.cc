// PagePool on its own: allocation under the page budget, reference counts,
// the prefix-cache key index, and the order in which free pages are reused
// (unkeyed first, then cached keyed pages least recently freed first).
#include "cache/page_pool.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "absl/base/config.h"
#include "cache/huge_pages_test_util.h"
#include "cache/slab_memory.h"
#include "gtest/gtest.h"

namespace kvs {
namespace {

KvGeometry Geometry() {
  return {.n_layers = 1, .n_kv_heads = 1, .head_dim = 4, .page_tokens = 4, .dtype = KvDtype::kF32};
}

PageKey Key(uint8_t b) {
  PageKey k{};
  k[0] = b;
  k[15] = static_cast<uint8_t>(~b);
  return k;
}

PageId MustAllocate(PagePool& pool) {
  absl::StatusOr<PageId> p = pool.Allocate();
  EXPECT_TRUE(p.ok()) << p.status();
  return p.value_or(-1);
}

TEST(PagePoolTest, AllocateHandsOutDistinctPagesWithOneReferenceUntilTheBudget) {
  PagePool pool(Geometry(), 4);
  std::set<PageId> pages;
  for (int i = 0; i < 4; ++i) {
    const PageId p = MustAllocate(pool);
    EXPECT_EQ(pool.ref_count(p), 1);
    pages.insert(p);
  }
  EXPECT_EQ(pages.size(), 4u);
  const PagePoolStats before = pool.Stats();
  EXPECT_EQ(before.pages_in_use, 4);
  EXPECT_EQ(before.page_references, 4);
  EXPECT_EQ(before.max_pages, 4);
  EXPECT_EQ(before.bytes_in_use(), 4 * static_cast<int64_t>(Geometry().page_bytes()));

  const absl::StatusOr<PageId> more = pool.Allocate();
  EXPECT_EQ(more.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(more.status().message().find("KV cache is full"), std::string::npos);
  const PagePoolStats after = pool.Stats();
  EXPECT_EQ(after.pages_in_use, 4);
  EXPECT_EQ(after.page_references, 4);
}

// Reviving a cached free page takes a page as Allocate does: the pages set
// aside for running calls are not for others (a restore), only for
// from_reserve callers (a running call attaching a cached prefix).
// Pages freed while ReserveNextFreed is set go into the reserve as they
// are freed: a caller without from_reserve never gets them (a load by
// another call, between a running call's slide and the engine's next
// SetReserved), a from_reserve caller does; SetReserved ends it.
TEST(PagePoolTest, PagesFreedAfterReserveNextFreedGoStraightIntoTheReserve) {
  PagePool pool(Geometry(), 4);
  std::vector<PageId> pages;
  for (int i = 0; i < 4; ++i) pages.push_back(*pool.Allocate());
  pool.ReserveNextFreed(2);
  EXPECT_EQ(pool.reserved(), 0) << "nothing set aside before a page is freed";
  for (PageId p : pages) pool.Release(p);  // four freed: the first two reserved
  EXPECT_EQ(pool.reserved(), 2);
  EXPECT_TRUE(pool.Allocate().ok());
  EXPECT_TRUE(pool.Allocate().ok());
  EXPECT_EQ(pool.Allocate().status().code(), absl::StatusCode::kResourceExhausted) << "the reserved two";
  EXPECT_TRUE(pool.Allocate(/*from_reserve=*/true).ok());
  pool.SetReserved(0);
  EXPECT_TRUE(pool.Allocate().ok());
}

TEST(PagePoolTest, ACachedFreePageIsNotRevivedOutOfTheReserveExceptForItsCallers) {
  PagePool pool(Geometry(), 4);
  absl::StatusOr<PageId> page = pool.Allocate();
  ASSERT_TRUE(page.ok());
  pool.SetKey(*page, Key(7));
  pool.Release(*page);  // free, still cached
  pool.SetReserved(4);
  EXPECT_FALSE(pool.Allocate().ok());
  EXPECT_FALSE(pool.LookupKey(Key(7)).has_value());
  EXPECT_EQ(pool.Stats().pages_in_use, 0);
  const std::optional<PageId> revived = pool.LookupKey(Key(7), /*from_reserve=*/true);
  ASSERT_TRUE(revived.has_value());
  EXPECT_EQ(*revived, *page);
  // A page in use is shared without taking a page: no reserve is touched.
  const std::optional<PageId> shared = pool.LookupKey(Key(7));
  ASSERT_TRUE(shared.has_value());
  EXPECT_EQ(pool.ref_count(*page), 2);
  pool.SetReserved(0);
  EXPECT_TRUE(pool.Allocate().ok());
}

// TakePages, a restore's pages in one step: keys some page holds give
// that page (shared, or revived from the cache), the others fresh pages.
TEST(PagePoolTest, TakePagesSharesAndRevivesKeyedPagesAndTakesFreshOnesForTheRest) {
  PagePool pool(Geometry(), 6);
  const PageId in_use = MustAllocate(pool);
  pool.SetKey(in_use, Key(1));
  const PageId cached = MustAllocate(pool);
  pool.SetKey(cached, Key(2));
  pool.Release(cached);  // free, still keyed
  const std::vector<std::optional<PageKey>> keys = {Key(1), Key(2), Key(3), std::nullopt};
  std::vector<PageId> pages;
  std::vector<bool> found;
  ASSERT_TRUE(pool.TakePages(keys, &pages, &found).ok());
  ASSERT_EQ(pages.size(), 4u);
  EXPECT_EQ(pages[0], in_use);
  EXPECT_EQ(pages[1], cached);
  EXPECT_EQ(found, (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(pool.ref_count(in_use), 2);
  EXPECT_EQ(pool.ref_count(cached), 1);
  EXPECT_EQ(std::set<PageId>(pages.begin(), pages.end()).size(), 4u);
  for (PageId p : {pages[2], pages[3]}) {
    EXPECT_EQ(pool.ref_count(p), 1);
    EXPECT_FALSE(pool.has_key(p));
  }
  const PagePoolStats st = pool.Stats();
  EXPECT_EQ(st.pages_in_use, 4);
  EXPECT_EQ(st.pages_shared, 1);
  EXPECT_EQ(st.page_references, 5);
  EXPECT_EQ(st.pages_cached, 0);
}

// When the room it needs is not there, TakePages takes nothing, so two
// restores racing for the last pages cannot each take part and both fail
// (and wake each other by giving it back).
TEST(PagePoolTest, TakePagesTakesNothingWhenTheRoomItNeedsIsNotThere) {
  PagePool pool(Geometry(), 4);
  const PageId held = MustAllocate(pool);
  pool.SetKey(held, Key(1));
  const PageId cached = MustAllocate(pool);
  pool.SetKey(cached, Key(2));
  pool.Release(cached);
  pool.SetReserved(1);
  // Key 1 is shared (no room); key 2 revived and two fresh pages: 3 pages
  // of room, where 4 - 1 in use - 1 reserved = 2 are left.
  const std::vector<std::optional<PageKey>> keys = {Key(1), Key(2), std::nullopt, Key(9)};
  const PagePoolStats before = pool.Stats();
  const int64_t room_seen = pool.room_given_back();
  std::vector<PageId> pages = {42};
  std::vector<bool> found = {true};
  const absl::Status s = pool.TakePages(keys, &pages, &found);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_NE(s.message().find("room for 3 more pages"), absl::string_view::npos) << s;
  EXPECT_TRUE(pages.empty());
  EXPECT_TRUE(found.empty());
  const PagePoolStats after = pool.Stats();
  EXPECT_EQ(after.pages_in_use, before.pages_in_use);
  EXPECT_EQ(after.page_references, before.page_references);
  EXPECT_EQ(after.pages_cached, 1);
  EXPECT_EQ(pool.room_given_back(), room_seen);
  EXPECT_EQ(pool.ref_count(held), 1);
  EXPECT_EQ(pool.LookupKey(Key(2)), std::optional<PageId>(cached)) << "the cached page kept its key";
  pool.Release(cached);
  // With the reserve given up, the same call fits exactly.
  pool.SetReserved(0);
  ASSERT_TRUE(pool.TakePages(keys, &pages, &found).ok());
  EXPECT_EQ(pool.Stats().pages_in_use, 4);
}

// Fresh pages come from the cache's oldest pages when nothing else is
// free, but never from a page the same call asks for by key.
TEST(PagePoolTest, TakePagesNeverEvictsAKeyItAsksFor) {
  PagePool pool(Geometry(), 3);
  std::vector<PageId> all;
  for (int i = 0; i < 3; ++i) {
    all.push_back(MustAllocate(pool));
    pool.SetKey(all.back(), Key(10 + i));
  }
  for (PageId p : all) pool.Release(p);  // all cached; key 10 the oldest
  const std::vector<std::optional<PageKey>> keys = {std::nullopt, Key(10), Key(12)};
  std::vector<PageId> pages;
  std::vector<bool> found;
  ASSERT_TRUE(pool.TakePages(keys, &pages, &found).ok());
  EXPECT_EQ(pages[1], all[0]);
  EXPECT_EQ(pages[2], all[2]);
  EXPECT_EQ(pages[0], all[1]) << "the fresh page is the one cached page not asked for";
  EXPECT_EQ(found, (std::vector<bool>{false, true, true}));
  EXPECT_FALSE(pool.has_key(pages[0]));
}

// The process's address space in bytes (/proc/self/statm's first field).
int64_t AddressSpaceBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0;
  statm >> pages;
  return pages * sysconf(_SC_PAGESIZE);
}

// What TakePagesAgainstAFullAddressSpace exits with: 0 when every check
// holds, kFirstCheck + N when check N did not (codes apart from a
// runtime's own exit codes), kCannotCap where the environment's hard
// limit leaves no room to cap the address space (a skip).
constexpr int kFirstCheck = 100;
constexpr int kCannotCap = 99;

// TakePagesThatCannotMapASlab..., in a child process whose address space
// the kernel caps, so the pool's next slab mapping really fails. (Unused
// in sanitizer builds, which skip that test.)
[[maybe_unused]] int TakePagesAgainstAFullAddressSpace() {
  auto failed = [](int check) { return kFirstCheck + check; };
  // Pages of 2 MiB: a slab is a few of them, the pool several slabs.
  const KvGeometry g = {.n_layers = 8, .n_kv_heads = 8, .head_dim = 128, .page_tokens = 32, .dtype = KvDtype::kF32};
  constexpr int64_t kMaxPages = 64;
  const int first_slab = ChooseSlabShape(g.page_bytes(), kMaxPages).pages;
  if (first_slab < 3 || first_slab >= kMaxPages) return failed(1);
  PagePool pool(g, kMaxPages);
  std::vector<PageId> first;
  for (int i = 0; i < first_slab; ++i) {
    absl::StatusOr<PageId> p = pool.Allocate();
    if (!p.ok()) return failed(2);
    first.push_back(*p);
  }
  // Every page of the first slab taken; then one held under key 1, and two
  // cached: key 2 freed before key 3, so key 2 is evicted first.
  const PageId held = first[0], cached_older = first[1], cached_newer = first[2];
  pool.SetKey(held, Key(1));
  pool.SetKey(cached_older, Key(2));
  pool.SetKey(cached_newer, Key(3));
  pool.Release(cached_older);
  pool.Release(cached_newer);
  const PagePoolStats before = pool.Stats();
  const int64_t room_seen = pool.room_given_back();
  rlimit cap{};
  if (getrlimit(RLIMIT_AS, &cap) != 0) return failed(3);
  const int64_t address_space = AddressSpaceBytes();
  if (address_space <= 0) return failed(4);
  const rlim_t old_cap = cap.rlim_cur;
  cap.rlim_cur = static_cast<rlim_t>(address_space + (int64_t{1} << 20));
  if (cap.rlim_max != RLIM_INFINITY && cap.rlim_max < cap.rlim_cur) return kCannotCap;
  if (setrlimit(RLIMIT_AS, &cap) != 0) return failed(4);
  // Shares key 1, revives key 2, and needs a fresh page: a new slab.
  const std::vector<std::optional<PageKey>> keys = {Key(1), Key(2), std::nullopt};
  std::vector<PageId> pages;
  std::vector<bool> found;
  const absl::Status st = pool.TakePages(keys, &pages, &found);
  if (!absl::IsResourceExhausted(st) || st.message() != "cannot map KV cache memory") return failed(5);
  if (!pages.empty() || !found.empty()) return failed(6);
  const PagePoolStats after = pool.Stats();
  if (after.pages_in_use != before.pages_in_use || after.page_references != before.page_references ||
      after.pages_shared != before.pages_shared || after.pages_cached != before.pages_cached ||
      after.pages_mapped != before.pages_mapped) {
    return failed(7);
  }
  if (pool.ref_count(held) != 1 || pool.ref_count(cached_older) != 0) return failed(8);
  if (pool.room_given_back() != room_seen) return failed(9);  // giving back what it took is not room
  // Still cached under its key (has_key and KeyReferenced take no reference).
  if (!pool.has_key(cached_older) || pool.KeyReferenced(Key(2))) return failed(10);
  cap.rlim_cur = old_cap;
  if (setrlimit(RLIMIT_AS, &cap) != 0) return failed(11);
  // Key 2 kept its place in the eviction order: once every uncached page
  // is taken, the next allocation evicts it, not key 3.
  const int64_t uncached = kMaxPages - before.pages_in_use - before.pages_cached;
  std::vector<PageId> filler;
  for (int64_t i = 0; i <= uncached; ++i) {
    absl::StatusOr<PageId> p = pool.Allocate();
    if (!p.ok()) return failed(12);
    filler.push_back(*p);
  }
  if (pool.has_key(cached_older) || !pool.has_key(cached_newer)) return failed(13);  // key 3 went first
  // With the address space back, the same call succeeds.
  for (PageId p : filler) pool.Release(p);
  if (!pool.TakePages(keys, &pages, &found).ok() || pages.size() != 3) return failed(14);
  if (pages[0] != held || found[1] || found[2]) return failed(15);  // key 2 was evicted
  return 0;
}

// A fresh page that needs a slab the kernel will not map: the call takes
// nothing, as when its room is not there, and leaves every page as it was,
// a cached page it would have revived in its place in the eviction order
// too.
TEST(PagePoolTest, TakePagesThatCannotMapASlabLeavesThePoolAsItWas) {
#if defined(ABSL_HAVE_ADDRESS_SANITIZER) || defined(ABSL_HAVE_THREAD_SANITIZER) || \
    defined(ABSL_HAVE_MEMORY_SANITIZER) || defined(ABSL_HAVE_HWADDRESS_SANITIZER)
  GTEST_SKIP() << "a sanitizer's runtime maps memory of its own as it goes, which the cap would refuse";
#else
  const pid_t child = fork();
  ASSERT_GE(child, 0) << std::strerror(errno);
  if (child == 0) _exit(TakePagesAgainstAFullAddressSpace());
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_FALSE(WIFSIGNALED(status)) << "the child died of signal " << WTERMSIG(status);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  const int code = WEXITSTATUS(status);
  if (code == kCannotCap) GTEST_SKIP() << "the hard RLIMIT_AS is below what the cap needs";
  EXPECT_EQ(code, 0) << (code > kFirstCheck ? "check " + std::to_string(code - kFirstCheck) +
                                                   " of TakePagesAgainstAFullAddressSpace failed"
                                             : "the child exited with " + std::to_string(code));
#endif
}

TEST(PagePoolTest, APrefaultedPoolHandsOutEveryPageOfItsBudgetOnceAndZeroed) {
  // 300 pages: a slab of them (Populate's every touch).
  PagePool pool(Geometry(), 300);
  ASSERT_TRUE(pool.Prefault().ok());
  ASSERT_TRUE(pool.Prefault().ok());  // nothing left to map
  std::set<PageId> seen;
  for (int i = 0; i < 300; ++i) {
    absl::StatusOr<PageId> page = pool.Allocate();
    ASSERT_TRUE(page.ok()) << i << ": " << page.status();
    EXPECT_TRUE(seen.insert(*page).second);
    const uint8_t* data = pool.data(*page);
    EXPECT_EQ(data[0], 0);
    EXPECT_EQ(data[Geometry().page_bytes() - 1], 0);
  }
  EXPECT_TRUE(absl::IsResourceExhausted(pool.Allocate().status()));
}

TEST(PagePoolTest, APrefaultedPoolsPagesLieInHugePagesWhereTheKernelOffersThem) {
  // Qwen3-0.6B's q8_0 pages (952 KiB). A restore into pages the kernel
  // backs with 4 KiB pages ran at a third of the speed on a PVM guest, and
  // attention pays a TLB miss per block there (cache/slab_memory.h).
  if (!KernelOffersHugePages()) GTEST_SKIP() << "transparent huge pages are off on this kernel";
  const KvGeometry g{.n_layers = 28, .n_kv_heads = 8, .head_dim = 128, .page_tokens = 16, .dtype = KvDtype::kQ8_0};
  constexpr int kPages = 45;
  PagePool pool(g, kPages);
  ASSERT_TRUE(pool.Prefault().ok());
  // The huge pages of the mappings the pages lie in, each mapping counted
  // once (slabs side by side may be one mapping).
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (PageId p = 0; p < kPages; ++p) {
    const uintptr_t begin = reinterpret_cast<uintptr_t>(pool.data(p));
    lo = std::min(lo, begin);
    hi = std::max(hi, begin + g.page_bytes());
  }
  const int64_t page_bytes_in_huge_pages = AnonHugeBytesOverlapping(reinterpret_cast<void*>(lo), hi - lo);
  ASSERT_GE(page_bytes_in_huge_pages, 0) << "cannot read /proc/self/smaps";
  // All of them, give or take a huge page the kernel could not find (a
  // fragmented machine): at least 90% (slabs mapped at 4 KiB alignment
  // held about 70%).
  EXPECT_GE(static_cast<double>(page_bytes_in_huge_pages), 0.9 * kPages * g.page_bytes());
}

// 64 KiB pages (16 of the kernel's 4 KiB pages), 128 to a slab.
KvGeometry LargePageGeometry() {
  return {.n_layers = 4, .n_kv_heads = 2, .head_dim = 64, .page_tokens = 16, .dtype = KvDtype::kF32};
}

// True if the kernel holds every byte of the page in memory (mincore).
bool Resident(const PagePool& pool, PageId page) {
  const uintptr_t os_page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(pool.data(page)) & ~(os_page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(pool.data(page)) + pool.geometry().page_bytes();
  std::vector<unsigned char> in_core((end - begin + os_page - 1) / os_page);
  if (::mincore(reinterpret_cast<void*>(begin), end - begin, in_core.data()) != 0) return false;
  for (unsigned char c : in_core) {
    if ((c & 1) == 0) return false;
  }
  return true;
}

// A budget of one slab and 3 pages: the last slab holds 3 pages (192 KiB),
// so the pool maps one huge page for it, not a whole 8 MiB slab; with
// --kv-prefault the rest of such a slab was resident, past the budget.
TEST(PagePoolTest, APrefaultedPoolsLastSlabIsOnlyAsLongAsItsPagesNeed) {
  const KvGeometry g = LargePageGeometry();
  PagePool pool(g, 128 + 3);
  ASSERT_TRUE(pool.Prefault().ok());
  for (PageId p = 0; p < 131; ++p) EXPECT_TRUE(Resident(pool, p)) << p;
  // The last slab starts at its first page (slabs are huge-page aligned).
  const uintptr_t last_slab = reinterpret_cast<uintptr_t>(pool.data(128));
  ASSERT_EQ(last_slab % kSlabHugePageBytes, 0u);
  const uintptr_t used_end = last_slab + kSlabHugePageBytes;  // 3 pages, rounded up
  const size_t rest = 128 * g.page_bytes() - kSlabHugePageBytes;  // the rest of a whole slab
  std::vector<unsigned char> in_core(rest / static_cast<size_t>(::sysconf(_SC_PAGESIZE)));
  if (::mincore(reinterpret_cast<void*>(used_end), rest, in_core.data()) == 0) {
    // Mapped (by something else): none of it may be the pool's, resident.
    EXPECT_EQ(std::count_if(in_core.begin(), in_core.end(), [](unsigned char c) { return (c & 1) != 0; }), 0);
  } else {
    EXPECT_EQ(errno, ENOMEM);  // not mapped at all
  }
}

// A caller that found the pool full waits for room instead of polling:
// woken by a page's last Release, or a smaller reserve; a deadline ends
// the wait otherwise.
TEST(PagePoolTest, AWaitForRoomEndsWhenAPageIsFreedOrTheReserveShrinksOrAtTheDeadline) {
  PagePool pool(Geometry(), 2);
  const PageId a = MustAllocate(pool);
  const PageId b = MustAllocate(pool);
  pool.AddRef(b);
  int64_t seen = pool.room_given_back();
  ASSERT_TRUE(absl::IsResourceExhausted(pool.Allocate().status()));
  EXPECT_FALSE(pool.AwaitRoomGivenBack(seen, absl::Now() + absl::Milliseconds(20)));
  pool.Release(b);  // still referenced once: no room
  EXPECT_FALSE(pool.AwaitRoomGivenBack(seen, absl::Now() + absl::Milliseconds(20)));

  std::thread releaser([&] { pool.Release(a); });
  EXPECT_TRUE(pool.AwaitRoomGivenBack(seen, absl::Now() + absl::Seconds(30)));
  releaser.join();
  const absl::StatusOr<PageId> d = pool.Allocate();
  ASSERT_TRUE(d.ok());
  pool.Release(*d);
  pool.Release(b);

  pool.SetReserved(1);
  seen = pool.room_given_back();
  // A page freed into the reserve (ReserveNextFreed) gives no room.
  const PageId c = MustAllocate(pool);
  pool.ReserveNextFreed(1);
  pool.Release(c);
  EXPECT_EQ(pool.room_given_back(), seen);
  std::thread unreserver([&] { pool.SetReserved(0); });
  EXPECT_TRUE(pool.AwaitRoomGivenBack(seen, absl::Now() + absl::Seconds(30)));
  unreserver.join();
}

// Release says whether it gave room back, and the room callback hears of
// each time room_given_back() grows (a page's last Release, a smaller
// reserve, NoteRoomMayBeMade) and of nothing else.
TEST(PagePoolTest, TheRoomCallbackHearsOfEachTimeRoomIsGivenBackAndReleaseSaysSo) {
  PagePool pool(Geometry(), 4);
  int calls = 0;
  pool.SetRoomGivenBackCallback([&] { ++calls; });
  const PageId a = MustAllocate(pool);
  pool.AddRef(a);
  EXPECT_FALSE(pool.Release(a)) << "still referenced";
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(pool.Release(a));
  EXPECT_EQ(calls, 1);

  pool.SetReserved(2);
  EXPECT_EQ(calls, 1) << "a larger reserve gives nothing back";
  const PageId b = MustAllocate(pool);
  pool.ReserveNextFreed(1);
  EXPECT_FALSE(pool.Release(b)) << "freed into the reserve";
  EXPECT_EQ(calls, 1);
  pool.SetReserved(1);
  EXPECT_EQ(calls, 2);

  int64_t seen = pool.room_given_back();
  std::thread noter([&] { pool.NoteRoomMayBeMade(); });
  EXPECT_TRUE(pool.AwaitRoomGivenBack(seen, absl::Now() + absl::Seconds(30)));
  noter.join();
  EXPECT_EQ(calls, 3);

  pool.SetRoomGivenBackCallback(nullptr);
  pool.NoteRoomMayBeMade();
  EXPECT_EQ(calls, 3) << "removed";
}

// Free pages in mapped slabs (none are cached in these tests).
int64_t MappedFree(const PagePool& pool) {
  const PagePoolStats s = pool.Stats();
  return s.pages_mapped - s.pages_in_use - s.pages_cached;
}

TEST(PagePoolTest, WithoutWarmingAFreshPageIsNotYetBackedByMemory) {
  // The control for the next test: what a restore into a fresh pool meets.
  PagePool pool(LargePageGeometry(), 1024);
  const PageId page = MustAllocate(pool);
  EXPECT_FALSE(Resident(pool, page));
  pool.data(page)[0] = 1;
  EXPECT_EQ(pool.data(page)[0], 1);
}

TEST(PagePoolTest, KeepWarmBacksPagesBeforeTheyAreAllocatedAndRefillsAsTheyAreTaken) {
  constexpr int64_t kWarm = 200, kBudget = 1024, kSlab = 128;
  PagePool pool(LargePageGeometry(), kBudget);
  ASSERT_TRUE(pool.KeepWarm(kWarm).ok());
  EXPECT_GE(MappedFree(pool), kWarm);
  EXPECT_LT(pool.Stats().pages_mapped, kWarm + kSlab);  // not the whole budget
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < kWarm; ++i) {
      const PageId page = MustAllocate(pool);
      ASSERT_TRUE(Resident(pool, page)) << "round " << round << ", page " << i;
      EXPECT_EQ(pool.data(page)[pool.geometry().page_bytes() - 1], 0);
    }
    // The background thread maps the next pages ahead.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (MappedFree(pool) < kWarm && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_GE(MappedFree(pool), kWarm) << "round " << round;
    EXPECT_LT(pool.Stats().pages_mapped, (round + 1) * kWarm + kWarm + kSlab);
  }
}

TEST(PagePoolTest, WhileAWarmingPauseLivesNothingIsMappedAndAfterItTheThreadRefills) {
  constexpr int64_t kWarm = 64;
  PagePool pool(LargePageGeometry(), 1024);
  ASSERT_TRUE(pool.KeepWarm(kWarm).ok());
  const int64_t mapped = pool.Stats().pages_mapped;
  {
    PagePool::WarmingPause pause(&pool);
    while (MappedFree(pool) > 0) MustAllocate(pool);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(pool.Stats().pages_mapped, mapped);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (MappedFree(pool) < kWarm && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE(MappedFree(pool), kWarm);
}

TEST(PagePoolTest, KeepWarmAboveTheBudgetMapsTheBudgetAndAllocationStopsThere) {
  PagePool pool(LargePageGeometry(), 300);
  ASSERT_TRUE(pool.KeepWarm(100000).ok());
  EXPECT_EQ(pool.Stats().pages_mapped, 300);
  std::set<PageId> seen;
  for (int i = 0; i < 300; ++i) {
    const PageId page = MustAllocate(pool);
    EXPECT_TRUE(Resident(pool, page));
    EXPECT_TRUE(seen.insert(page).second);
  }
  EXPECT_TRUE(absl::IsResourceExhausted(pool.Allocate().status()));
}

TEST(PagePoolTest, StatsNameTheWarmTargetCappedByTheBudget) {
  PagePool on_demand(LargePageGeometry(), 300);
  EXPECT_EQ(on_demand.Stats().pages_warm_target, 0);
  PagePool warm(LargePageGeometry(), 300);
  ASSERT_TRUE(warm.KeepWarm(40).ok());
  EXPECT_EQ(warm.Stats().pages_warm_target, 40);
  ASSERT_TRUE(warm.KeepWarm(100000).ok());
  EXPECT_EQ(warm.Stats().pages_warm_target, 300);
  PagePool prefaulted(LargePageGeometry(), 300);
  ASSERT_TRUE(prefaulted.Prefault().ok());
  EXPECT_EQ(prefaulted.Stats().pages_warm_target, 300);
}

TEST(PagePoolTest, AllocationsRacingTheWarmingThreadHandOutEachPageOnce) {
  constexpr int kThreads = 3, kPerThread = 300;
  PagePool pool(LargePageGeometry(), 1024);
  ASSERT_TRUE(pool.KeepWarm(64).ok());
  std::vector<std::vector<PageId>> taken(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&pool, &mine = taken[t]] {
      for (int i = 0; i < kPerThread; ++i) {
        absl::StatusOr<PageId> page = pool.Allocate();
        if (!page.ok()) return;
        pool.data(*page)[0] = static_cast<uint8_t>(i);
        mine.push_back(*page);
        if (i % 3 == 2) {  // give some back, so pages are reused too
          pool.Release(mine.back());
          mine.pop_back();
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::set<PageId> seen;
  for (const std::vector<PageId>& mine : taken) {
    EXPECT_EQ(mine.size(), static_cast<size_t>(kPerThread - kPerThread / 3));
    for (PageId p : mine) EXPECT_TRUE(seen.insert(p).second) << p;
  }
  EXPECT_EQ(pool.Stats().pages_in_use, static_cast<int64_t>(seen.size()));
  EXPECT_LE(pool.Stats().pages_mapped, 1024);
}

TEST(PagePoolTest, ReferencesCountSharingAndTheLastReleaseFreesThePage) {
  PagePool pool(Geometry(), 2);
  const PageId p = MustAllocate(pool);
  pool.AddRef(p);
  pool.AddRef(p);
  EXPECT_EQ(pool.ref_count(p), 3);
  PagePoolStats s = pool.Stats();
  EXPECT_EQ(s.pages_in_use, 1);
  EXPECT_EQ(s.pages_shared, 1);
  EXPECT_EQ(s.page_references, 3);
  EXPECT_EQ(s.bytes_saved_by_sharing(), 2 * static_cast<int64_t>(Geometry().page_bytes()));

  pool.Release(p);
  pool.Release(p);
  s = pool.Stats();
  EXPECT_EQ(s.pages_shared, 0);
  EXPECT_EQ(s.page_references, 1);
  pool.Release(p);
  EXPECT_EQ(pool.ref_count(p), 0);
  s = pool.Stats();
  EXPECT_EQ(s.pages_in_use, 0);
  EXPECT_EQ(s.page_references, 0);
  EXPECT_EQ(s.pages_cached, 0);  // it had no key
}

TEST(PagePoolTest, UnkeyedFreePagesAreReusedLastFreedFirst) {
  PagePool pool(Geometry(), 3);
  const PageId a = MustAllocate(pool);
  const PageId b = MustAllocate(pool);
  pool.Release(a);
  pool.Release(b);
  EXPECT_EQ(MustAllocate(pool), b);
  EXPECT_EQ(MustAllocate(pool), a);
}

TEST(PagePoolTest, AReleasedKeyedPageStaysFindableWithItsContents) {
  PagePool pool(Geometry(), 2);
  const PageId p = MustAllocate(pool);
  std::memset(pool.data(p), 0x5A, Geometry().page_bytes());
  pool.SetKey(p, Key(1));
  EXPECT_TRUE(pool.has_key(p));
  pool.Release(p);
  PagePoolStats s = pool.Stats();
  EXPECT_EQ(s.pages_in_use, 0);
  EXPECT_EQ(s.pages_cached, 1);

  const std::optional<PageId> hit = pool.LookupKey(Key(1));
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(*hit, p);
  EXPECT_EQ(pool.ref_count(p), 1);
  EXPECT_EQ(pool.data(p)[Geometry().page_bytes() - 1], 0x5A);
  s = pool.Stats();
  EXPECT_EQ(s.pages_in_use, 1);
  EXPECT_EQ(s.pages_cached, 0);
  EXPECT_FALSE(pool.LookupKey(Key(2)).has_value());
}

TEST(PagePoolTest, ALookupOfAPageInUseSharesIt) {
  PagePool pool(Geometry(), 2);
  const PageId p = MustAllocate(pool);
  pool.SetKey(p, Key(3));
  EXPECT_EQ(pool.LookupKey(Key(3)), p);
  EXPECT_EQ(pool.ref_count(p), 2);
  const PagePoolStats s = pool.Stats();
  EXPECT_EQ(s.pages_in_use, 1);
  EXPECT_EQ(s.pages_shared, 1);
  EXPECT_EQ(s.page_references, 2);
}

TEST(PagePoolTest, AKeyBelongsToTheFirstPageGivenIt) {
  PagePool pool(Geometry(), 3);
  const PageId a = MustAllocate(pool);
  const PageId b = MustAllocate(pool);
  pool.SetKey(a, Key(1));
  pool.SetKey(b, Key(1));  // taken: no-op
  EXPECT_FALSE(pool.has_key(b));
  pool.SetKey(a, Key(2));  // a keeps its first key
  EXPECT_FALSE(pool.LookupKey(Key(2)).has_value());
  EXPECT_EQ(pool.LookupKey(Key(1)), a);
}

TEST(PagePoolTest, UnkeyedPagesAreReusedBeforeCachedOnes) {
  PagePool pool(Geometry(), 3);
  const PageId a = MustAllocate(pool);
  const PageId b = MustAllocate(pool);
  const PageId c = MustAllocate(pool);
  pool.SetKey(a, Key(1));
  pool.Release(a);  // cached
  pool.Release(b);  // plain free
  EXPECT_EQ(MustAllocate(pool), b);
  EXPECT_TRUE(pool.has_key(a));
  EXPECT_EQ(pool.Stats().pages_cached, 1);
  // Nothing else free: the cached page is evicted and reused.
  EXPECT_EQ(MustAllocate(pool), a);
  EXPECT_FALSE(pool.has_key(a));
  EXPECT_FALSE(pool.LookupKey(Key(1)).has_value());
  EXPECT_EQ(pool.Stats().pages_cached, 0);
  EXPECT_EQ(pool.Allocate().status().code(), absl::StatusCode::kResourceExhausted);
  pool.Release(c);
}

TEST(PagePoolTest, CachedPagesAreEvictedLeastRecentlyFreedFirst) {
  PagePool pool(Geometry(), 3);
  const PageId a = MustAllocate(pool);
  const PageId b = MustAllocate(pool);
  const PageId c = MustAllocate(pool);
  pool.SetKey(a, Key(1));
  pool.SetKey(b, Key(2));
  pool.SetKey(c, Key(3));
  pool.Release(b);
  pool.Release(a);
  pool.Release(c);
  // Taking a back and freeing it again makes it the most recently freed.
  ASSERT_EQ(pool.LookupKey(Key(2)), b);
  pool.Release(b);  // freed order now: a, c, b
  EXPECT_EQ(MustAllocate(pool), a);
  EXPECT_FALSE(pool.LookupKey(Key(1)).has_value());
  EXPECT_EQ(MustAllocate(pool), c);
  EXPECT_FALSE(pool.LookupKey(Key(3)).has_value());
  EXPECT_EQ(pool.LookupKey(Key(2)), b);
  EXPECT_EQ(pool.Allocate().status().code(), absl::StatusCode::kResourceExhausted);
}

// Random operations against a model kept by the test: every Stats() field
// and every lookup match it exactly.
TEST(PagePoolTest, StatsAreExactOverRandomOperations) {
  constexpr int kPages = 12;
  PagePool pool(Geometry(), kPages);
  std::map<PageId, int> refs;                  // model: reference count of every page seen
  std::map<PageId, uint8_t> key_of;            // model: the key a page holds
  std::map<uint8_t, PageId> page_of;           // model: the page a key names
  std::mt19937 rng(7);
  auto held = [&] {
    std::vector<PageId> out;
    for (const auto& [p, n] : refs) {
      if (n > 0) out.push_back(p);
    }
    return out;
  };
  for (int step = 0; step < 5000; ++step) {
    const std::vector<PageId> in_use = held();
    const int op = static_cast<int>(rng() % 5);
    if (op == 0) {
      absl::StatusOr<PageId> p = pool.Allocate();
      if (static_cast<int>(in_use.size()) == kPages) {
        ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted) << step;
        continue;
      }
      ASSERT_TRUE(p.ok()) << step << " " << p.status();
      ASSERT_EQ(refs[*p], 0) << "handed out a page in use";
      refs[*p] = 1;
      if (auto k = key_of.find(*p); k != key_of.end()) {  // evicted from the cache
        page_of.erase(k->second);
        key_of.erase(k);
      }
    } else if (in_use.empty()) {
      continue;
    } else {
      const PageId p = in_use[rng() % in_use.size()];
      if (op == 1) {
        pool.AddRef(p);
        ++refs[p];
      } else if (op == 2 || op == 3) {
        pool.Release(p);
        --refs[p];
      } else {
        const uint8_t k = static_cast<uint8_t>(rng() % 20);
        pool.SetKey(p, Key(k));
        if (!key_of.contains(p) && !page_of.contains(k)) {
          key_of[p] = k;
          page_of[k] = p;
        }
      }
    }
    if (step % 3 == 0) {  // a lookup of a random key
      const uint8_t k = static_cast<uint8_t>(rng() % 20);
      const std::optional<PageId> hit = pool.LookupKey(Key(k));
      if (auto it = page_of.find(k); it != page_of.end()) {
        ASSERT_EQ(hit, it->second) << step;
        ++refs[it->second];
      } else {
        ASSERT_FALSE(hit.has_value()) << step;
      }
    }
    int64_t in_use_n = 0, shared = 0, references = 0, cached = 0;
    for (const auto& [p, n] : refs) {
      in_use_n += n > 0;
      shared += n > 1;
      references += n;
      cached += n == 0 && key_of.contains(p);
      ASSERT_EQ(pool.ref_count(p), n) << step;
      ASSERT_EQ(pool.has_key(p), key_of.contains(p)) << step;
    }
    const PagePoolStats s = pool.Stats();
    ASSERT_EQ(s.pages_in_use, in_use_n) << step;
    ASSERT_EQ(s.pages_shared, shared) << step;
    ASSERT_EQ(s.page_references, references) << step;
    ASSERT_EQ(s.pages_cached, cached) << step;
  }
}

TEST(PagePoolTest, PagesHeldByCountsThePagesWithAnOwnersReferencesOnceEach) {
  PagePool pool(Geometry(), 8);
  const PageOwner a = 1, b = 2;
  absl::StatusOr<PageId> p = pool.Allocate(false, a), q = pool.Allocate(false, a);
  ASSERT_TRUE(p.ok() && q.ok());
  pool.AddRef(*p, a);
  EXPECT_EQ(pool.PagesHeldBy(a), 2) << "two references to one page count once";
  EXPECT_EQ(pool.PagesHeldBy(b), 0);
  EXPECT_EQ(pool.PagesHeldBy(kNoPageOwner), 0);
  pool.SetKey(*q, Key(1));
  ASSERT_EQ(pool.LookupKey(Key(1), false, b), *q);
  EXPECT_EQ(pool.PagesHeldBy(a), 2);
  EXPECT_EQ(pool.PagesHeldBy(b), 1) << "a page two owners hold counts for each";
  pool.Release(*q, a);
  EXPECT_EQ(pool.PagesHeldBy(a), 1);
  EXPECT_EQ(pool.PagesHeldBy(b), 1) << "b still holds it";
  pool.Release(*q, b);
  EXPECT_EQ(pool.PagesHeldBy(b), 0);
  EXPECT_EQ(pool.Stats().pages_cached, 1);
  ASSERT_EQ(pool.LookupKey(Key(1), false, b), *q) << "revived from the cache";
  EXPECT_EQ(pool.PagesHeldBy(b), 1);
  pool.Release(*p, a);
  EXPECT_EQ(pool.PagesHeldBy(a), 1);
  pool.Release(*p, a);
  EXPECT_EQ(pool.PagesHeldBy(a), 0);
  std::vector<PageId> taken;
  std::vector<bool> found;
  const std::optional<PageKey> keys[] = {Key(1), std::nullopt, std::nullopt};
  ASSERT_TRUE(pool.TakePages(keys, &taken, &found, nullptr, a).ok());
  EXPECT_EQ(pool.PagesHeldBy(a), 3) << "a shared page and two fresh ones";
  EXPECT_EQ(pool.PagesHeldBy(b), 1);
  const std::optional<PageKey> too_many[] = {std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                                             std::nullopt, std::nullopt};
  std::vector<PageId> none;
  EXPECT_FALSE(pool.TakePages(too_many, &none, &found, nullptr, b).ok());
  EXPECT_EQ(pool.PagesHeldBy(b), 1) << "a take that fails counts nothing";
}

TEST(PagePoolTest, PagesHeldByIsExactForEveryOwnerOverRandomOperations) {
  constexpr int kPages = 10;
  constexpr PageOwner kOwners = 4;  // 0 (kNoPageOwner) to 3
  PagePool pool(Geometry(), kPages);
  std::map<PageId, std::map<PageOwner, int>> refs;  // model: each owner's references to each page
  std::map<PageId, uint8_t> key_of;                 // model: the key a page holds
  std::map<uint8_t, PageId> page_of;                // model: the page a key names
  std::mt19937 rng(11);
  auto total = [&](PageId p) {
    int n = 0;
    for (const auto& [o, r] : refs[p]) n += r;
    return n;
  };
  auto in_use = [&] {
    std::vector<PageId> out;
    for (const auto& [p, by] : refs) {
      if (total(p) > 0) out.push_back(p);
    }
    return out;
  };
  auto taken_fresh = [&](PageId p, PageOwner o) {
    ASSERT_EQ(total(p), 0) << "handed out a page in use";
    refs[p][o] = 1;
    if (auto k = key_of.find(p); k != key_of.end()) {  // evicted from the cache
      page_of.erase(k->second);
      key_of.erase(k);
    }
  };
  for (int step = 0; step < 6000; ++step) {
    const std::vector<PageId> used = in_use();
    const PageOwner owner = static_cast<PageOwner>(rng() % kOwners);
    const int op = static_cast<int>(rng() % 6);
    if (op == 0) {
      absl::StatusOr<PageId> p = pool.Allocate(false, owner);
      if (static_cast<int>(used.size()) == kPages) {
        ASSERT_FALSE(p.ok()) << step;
        continue;
      }
      ASSERT_TRUE(p.ok()) << step << " " << p.status();
      taken_fresh(*p, owner);
    } else if (op == 1) {  // a restore's take: keys of 0-3 pages, all or none
      std::vector<std::optional<PageKey>> keys(rng() % 4);
      for (auto& k : keys) {
        if (rng() % 2) k = Key(static_cast<uint8_t>(rng() % 12));
      }
      std::vector<PageId> pages;
      std::vector<bool> found;
      if (!pool.TakePages(keys, &pages, &found, nullptr, owner).ok()) continue;
      for (size_t i = 0; i < keys.size(); ++i) {
        if (found[i]) {
          ++refs[pages[i]][owner];
        } else {
          taken_fresh(pages[i], owner);
        }
      }
    } else if (used.empty()) {
      continue;
    } else {
      const PageId p = used[rng() % used.size()];
      if (op == 2) {
        pool.AddRef(p, owner);
        ++refs[p][owner];
      } else if (op == 3 || op == 4) {  // dropped by one of the owners holding it
        std::vector<PageOwner> holders;
        for (const auto& [o, r] : refs[p]) {
          if (r > 0) holders.push_back(o);
        }
        const PageOwner o = holders[rng() % holders.size()];
        pool.Release(p, o);
        --refs[p][o];
      } else {
        const uint8_t k = static_cast<uint8_t>(rng() % 12);
        pool.SetKey(p, Key(k));
        if (!key_of.contains(p) && !page_of.contains(k)) {
          key_of[p] = k;
          page_of[k] = p;
        }
      }
    }
    if (step % 3 == 0) {  // a lookup of a random key by a random owner
      const uint8_t k = static_cast<uint8_t>(rng() % 12);
      const PageOwner o = static_cast<PageOwner>(rng() % kOwners);
      const std::optional<PageId> hit = pool.LookupKey(Key(k), false, o);
      if (auto it = page_of.find(k); it != page_of.end()) {
        ASSERT_EQ(hit, it->second) << step;
        ++refs[it->second][o];
      } else {
        ASSERT_FALSE(hit.has_value()) << step;
      }
    }
    for (PageOwner o = 0; o < kOwners; ++o) {
      int64_t held = 0;
      for (const auto& [p, by] : refs) {
        auto it = by.find(o);
        held += it != by.end() && it->second > 0;
      }
      ASSERT_EQ(pool.PagesHeldBy(o), held) << "owner " << o << " at step " << step;
    }
    ASSERT_EQ(pool.Stats().pages_in_use, static_cast<int64_t>(in_use().size())) << step;
  }
}

TEST(PagePoolTest, TakeSoleUnkeysAPageHeldOnlyByTheCallerAndRefusesASharedOne) {
  PagePool pool(Geometry(), 4);
  const PageId a = *pool.Allocate();
  pool.SetKey(a, PageKey{7});
  pool.AddRef(a);
  EXPECT_FALSE(pool.TakeSole(a));  // shared: unchanged
  EXPECT_TRUE(pool.has_key(a));
  pool.Release(a);
  EXPECT_TRUE(pool.TakeSole(a));
  EXPECT_FALSE(pool.has_key(a));
  EXPECT_FALSE(pool.LookupKey(PageKey{7}).has_value());
  pool.SetKey(a, PageKey{8});  // it can take a new key
  EXPECT_EQ(pool.LookupKey(PageKey{8}), a);
}

}  // namespace
}  // namespace kvs
