// HugePageArena: 2 MiB-aligned reservation, 64-byte slices in order, and
// memory the kernel may back with transparent huge pages.
#include "model/huge_page_arena.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "cache/huge_pages_test_util.h"
#include "gtest/gtest.h"

namespace kvs {
namespace {

TEST(HugePageArenaTest, StartsAtAHugePageBoundaryAndHoldsWhatWasAskedForInWholeSmallPages) {
  HugePageArena arena;
  ASSERT_TRUE(arena.Reserve(3 * 1000 * 1000));
  EXPECT_EQ(arena.capacity(), 3002368u);  // 733 pages of 4 KiB
  uint8_t* first = arena.Take(1);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % HugePageArena::kHugePage, 0u);
}

TEST(HugePageArenaTest, KeepsNothingMappedPastItsCapacity) {
  HugePageArena arena;
  ASSERT_TRUE(arena.Reserve(HugePageArena::kHugePage + 4096));
  uint8_t* p = arena.Take(arena.capacity());
  ASSERT_NE(p, nullptr);
  unsigned char resident = 0;
  EXPECT_EQ(mincore(p + arena.capacity() - 4096, 4096, &resident), 0);
  // The alignment slack after the capacity was mapped and is given back.
  errno = 0;
  EXPECT_EQ(mincore(p + arena.capacity(), 4096, &resident), -1);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(HugePageArenaTest, HandsOutAlignedSlicesInOrderUntilFull) {
  HugePageArena arena;
  ASSERT_TRUE(arena.Reserve(HugePageArena::kHugePage));
  uint8_t* a = arena.Take(100);
  uint8_t* b = arena.Take(1000);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b, a + 128);  // 100 rounded up to the next 64-byte line
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
  // The rest of the huge page fits exactly; one byte more does not.
  const size_t rest = arena.capacity() - 128 - 1024;
  EXPECT_EQ(arena.Take(rest + 1), nullptr);
  uint8_t* c = arena.Take(rest);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c, b + 1024);
  EXPECT_EQ(arena.Take(1), nullptr);
  EXPECT_EQ(arena.used(), arena.capacity());
}

TEST(HugePageArenaTest, MemoryIsZeroAndWritable) {
  HugePageArena arena;
  ASSERT_TRUE(arena.Reserve(5000));
  uint8_t* p = arena.Take(5000);
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 5000; ++i) ASSERT_EQ(p[i], 0) << i;
  std::memset(p, 0xab, 5000);
  EXPECT_EQ(p[4999], 0xab);
}

TEST(HugePageArenaTest, ReservesOnlyOnce) {
  HugePageArena arena;
  EXPECT_EQ(arena.Take(1), nullptr);  // nothing reserved yet
  ASSERT_TRUE(arena.Reserve(1));
  EXPECT_FALSE(arena.Reserve(1));
  EXPECT_FALSE(HugePageArena().Reserve(0));
}

TEST(HugePageArenaTest, TheKernelMayBackItWithHugePages) {
  const std::string mode = TransparentHugePageMode();
  if (mode != "always" && mode != "madvise") GTEST_SKIP() << "transparent huge pages: '" << mode << "'";
  HugePageArena arena;
  ASSERT_TRUE(arena.Reserve(HugePageArena::kHugePage));
  uint8_t* p = arena.Take(HugePageArena::kHugePage);
  ASSERT_NE(p, nullptr);
  p[0] = 1;
  EXPECT_EQ(ThpEligible(p), 1);
}

}  // namespace
}  // namespace kvs
