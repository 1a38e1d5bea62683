// Slab memory: slabs are whole, aligned huge pages that hold whole KV
// pages, zeroed, and backed by huge pages where the kernel offers them.
#include "cache/slab_memory.h"

#include <cstring>
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

}  // namespace
}  // namespace kvs
