// Slab memory: slabs are whole, aligned huge pages that hold whole KV
// pages, zeroed, and backed by huge pages where the kernel offers them;
// RunOnEveryCore runs one call per core the process may use.
#include "cache/slab_memory.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "cache/huge_pages_test_util.h"
#include "cache/kv_geometry.h"
#include "gtest/gtest.h"

namespace kvs {
namespace {

// KV page sizes of real models: Qwen3-0.6B's (28 layers, 8 KV heads of
// 128) in q8_0, bf16 and f32; Llama 3.2 1B's (16 layers, 8 of 64) in q8_0;
// a 70B's (80 layers, 8 of 128) in f16, larger than a slab's 8 MiB
// target; and odd sizes.
std::vector<size_t> PageSizes() {
  auto bytes = [](int layers, int heads, int dim, KvDtype dtype) {
    return KvGeometry{.n_layers = layers, .n_kv_heads = heads, .head_dim = dim, .page_tokens = 16, .dtype = dtype}
        .page_bytes();
  };
  return {bytes(28, 8, 128, KvDtype::kQ8_0), bytes(28, 8, 128, KvDtype::kBF16), bytes(28, 8, 128, KvDtype::kF32),
          bytes(16, 8, 64, KvDtype::kQ8_0), bytes(80, 8, 128, KvDtype::kF16), 64, 65536, 123457, 3 * 1048576 + 5};
}

TEST(ChooseSlabShapeTest, ASlabIsWholeHugePagesHoldingWholeKvPages) {
  for (size_t page : PageSizes()) {
    const SlabShape shape = ChooseSlabShape(page, 1 << 20);
    EXPECT_GE(shape.pages, 1) << page;
    EXPECT_EQ(shape.mapped_bytes % kSlabHugePageBytes, 0u) << page;
    EXPECT_LE(shape.pages * page, shape.mapped_bytes) << page;
    EXPECT_LT(shape.mapped_bytes - shape.pages * page, kSlabHugePageBytes) << page;
  }
}

TEST(ChooseSlabShapeTest, RealModelsPagesWasteUnderOnePercentOfASlab) {
  // The count is chosen for its waste: the first count that fills 8 MiB
  // with Qwen3-0.6B's q8_0 pages (8) would waste 7%.
  for (size_t page : PageSizes()) {
    if (page == 123457 || page == 3 * 1048576 + 5) continue;  // odd sizes: only the bound above
    const SlabShape shape = ChooseSlabShape(page, 1 << 20);
    EXPECT_LT(static_cast<double>(shape.mapped_bytes - shape.pages * page), 0.01 * shape.mapped_bytes)
        << page << " bytes a page, " << shape.pages << " a slab";
  }
}

TEST(ChooseSlabShapeTest, ASmallPoolMapsNoMorePagesThanItsBudget) {
  const size_t page = 974848;
  EXPECT_EQ(ChooseSlabShape(page, 3).pages, 3);
  EXPECT_EQ(ChooseSlabShape(page, 3).mapped_bytes, 2 * kSlabHugePageBytes);
  EXPECT_EQ(ChooseSlabShape(64, 1).pages, 1);
  EXPECT_EQ(ChooseSlabShape(64, 1).mapped_bytes, kSlabHugePageBytes);
}

TEST(MapSlabTest, ASlabStartsOnAHugePageAndReadsZeroUntilWritten) {
  for (bool populate : {false, true}) {
    const size_t bytes = 3 * kSlabHugePageBytes;
    uint8_t* slab = MapSlab(bytes, populate);
    ASSERT_NE(slab, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(slab) % kSlabHugePageBytes, 0u);
    for (size_t at = 0; at < bytes; at += 4093) ASSERT_EQ(slab[at], 0) << at;
    EXPECT_EQ(slab[bytes - 1], 0);
    std::memset(slab, 0xA5, bytes);  // every byte is ours to write
    EXPECT_EQ(slab[bytes - 1], 0xA5);
    UnmapSlab(slab, bytes);
  }
}

TEST(MapSlabTest, APopulatedSlabIsBackedByHugePagesWhereTheKernelOffersThem) {
  if (!KernelOffersHugePages()) GTEST_SKIP() << "transparent huge pages are off on this kernel";
  const size_t bytes = 4 * kSlabHugePageBytes;
  uint8_t* slab = MapSlab(bytes, /*populate=*/true);
  ASSERT_NE(slab, nullptr);
  const int64_t huge = AnonHugeBytesOverlapping(slab, bytes);
  ASSERT_GE(huge, 0) << "cannot read /proc/self/smaps";
  // All of it, unless the kernel found no free huge page for one of the
  // four (memory fragmented): at least three.
  EXPECT_GE(huge, static_cast<int64_t>(3 * kSlabHugePageBytes));
  UnmapSlab(slab, bytes);
}

int AffinityCores() {
  cpu_set_t set;
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  return CPU_COUNT(&set);
}

TEST(RunOnEveryCoreTest, EachIndexRunsOnceOnAThreadOfItsOwnAndIndexZeroOnTheCaller) {
  std::vector<std::atomic<int>> calls(kMaxFillThreads);
  std::vector<std::thread::id> ran_on(kMaxFillThreads);
  std::atomic<int> running{0}, most_at_once{0};
  const int n = RunOnEveryCore([&](int t) {
    ++calls[t];
    ran_on[t] = std::this_thread::get_id();
    // Wait (up to 2 s) until every call has started: they run at once.
    const int now = ++running;
    int seen = most_at_once.load();
    while (now > seen && !most_at_once.compare_exchange_weak(seen, now)) {
    }
    for (int i = 0; i < 2000 && running.load() < std::min(AffinityCores(), kMaxFillThreads); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  EXPECT_EQ(n, std::min(AffinityCores(), kMaxFillThreads));
  EXPECT_EQ(most_at_once.load(), n);
  EXPECT_EQ(ran_on[0], std::this_thread::get_id());
  for (int t = 0; t < kMaxFillThreads; ++t) {
    EXPECT_EQ(calls[t].load(), t < n ? 1 : 0) << "index " << t;
    for (int u = 0; u < t && t < n; ++u) EXPECT_NE(ran_on[t], ran_on[u]) << t << " and " << u;
  }
}

TEST(RunOnEveryCoreTest, AProcessPinnedToOneCoreRunsOnlyTheCallersCall) {
  cpu_set_t all, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &all)) {
      CPU_SET(c, &one);
      break;
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  std::vector<int> indices;
  const int n = RunOnEveryCore([&](int t) { indices.push_back(t); });
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(indices, std::vector<int>{0});
}

}  // namespace
}  // namespace kvs
