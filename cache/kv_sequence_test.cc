// KvSequence and PagePool: sharing, copy-on-write, release, accounting.
#include "cache/kv_sequence.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <optional>

#include "gtest/gtest.h"

namespace kvs {
namespace {

KvGeometry SmallGeometry() {
  KvGeometry g;
  g.n_layers = 2;
  g.n_kv_heads = 2;
  g.head_dim = 4;
  g.page_tokens = 4;
  g.dtype = KvDtype::kF32;
  return g;
}

// Writes value `v` into every (layer, part, head) slot of positions
// [seq.length(), seq.length() + n) and commits them.
void AppendFilled(KvSequence& seq, int n, float v) {
  ASSERT_TRUE(seq.PrepareAppend(n).ok());
  const KvGeometry& g = seq.geometry();
  for (int p = seq.length(); p < seq.length() + n; ++p) {
    for (int l = 0; l < g.n_layers; ++l) {
      for (int part = 0; part < 2; ++part) {
        for (int h = 0; h < g.n_kv_heads; ++h) {
          float* dst = reinterpret_cast<float*>(seq.slot(p, l, static_cast<KvPart>(part), h));
          for (int d = 0; d < g.head_dim; ++d) dst[d] = v + p;
        }
      }
    }
  }
  seq.CommitAppend(n);
}

// Value stored at position p (layer 1, value part, head 1, last dim).
float ValueAt(const KvSequence& seq, int p) {
  const float* s = reinterpret_cast<const float*>(seq.slot(p, 1, KvPart::kValue, 1));
  return s[seq.geometry().head_dim - 1];
}

TEST(KvSequenceTest, PositionsMapToPagesAndSlots) {
  PagePool pool(SmallGeometry(), 16);
  KvSequence seq(&pool);
  AppendFilled(seq, 10, 100.0f);
  EXPECT_EQ(seq.length(), 10);
  EXPECT_EQ(seq.num_pages(), 3);
  for (int p = 0; p < 10; ++p) EXPECT_EQ(ValueAt(seq, p), 100.0f + p);
  // The layout is [layer][k|v][head][slot][dim]: slot 1 of (0, K, 0) is 4
  // floats after slot 0, and (0, V, 0) starts 2 heads * 4 slots * 4 dims later.
  uint8_t* base = seq.block(0, 0, KvPart::kKey, 0);
  EXPECT_EQ(seq.slot(1, 0, KvPart::kKey, 0), base + 4 * sizeof(float));
  EXPECT_EQ(seq.block(0, 0, KvPart::kValue, 0), base + 2 * 4 * 4 * sizeof(float));
  EXPECT_EQ(seq.block(0, 1, KvPart::kKey, 0), base + 2 * 2 * 4 * 4 * sizeof(float));
}

TEST(KvSequenceTest, ForkSharesEveryPageWithoutCopying) {
  PagePool pool(SmallGeometry(), 16);
  KvSequence parent(&pool);
  AppendFilled(parent, 10, 0.0f);
  ASSERT_EQ(pool.Stats().pages_in_use, 3);
  KvSequence child = parent.Fork();
  PagePoolStats s = pool.Stats();
  EXPECT_EQ(s.pages_in_use, 3) << "fork must not allocate";
  EXPECT_EQ(s.pages_shared, 3);
  EXPECT_EQ(s.page_references, 6);
  EXPECT_EQ(s.bytes_saved_by_sharing(), 3 * s.page_bytes);
  EXPECT_EQ(child.page_table(), parent.page_table());
  EXPECT_EQ(child.length(), 10);
}

TEST(KvSequenceTest, DivergingForksNeverChangeEachOther) {
  PagePool pool(SmallGeometry(), 16);
  KvSequence parent(&pool);
  AppendFilled(parent, 10, 0.0f);  // page 2 is partial (positions 8, 9)
  KvSequence child = parent.Fork();

  AppendFilled(child, 3, 1000.0f);   // writes positions 10..12 (page 2 and 3)
  AppendFilled(parent, 1, 5000.0f);  // writes position 10 in its own page 2
  for (int p = 0; p < 10; ++p) {
    EXPECT_EQ(ValueAt(parent, p), static_cast<float>(p));
    EXPECT_EQ(ValueAt(child, p), static_cast<float>(p));
  }
  EXPECT_EQ(ValueAt(parent, 10), 5010.0f);
  EXPECT_EQ(ValueAt(child, 10), 1010.0f);
  EXPECT_EQ(ValueAt(child, 12), 1012.0f);
  // Full pages 0 and 1 are still shared; page 2 was copied once (by the
  // child, the first writer) and the parent then owned the original alone.
  EXPECT_EQ(parent.page_table()[0], child.page_table()[0]);
  EXPECT_EQ(parent.page_table()[1], child.page_table()[1]);
  EXPECT_NE(parent.page_table()[2], child.page_table()[2]);
  PagePoolStats s = pool.Stats();
  EXPECT_EQ(s.pages_in_use, 2 + 2 + 1);  // shared 0,1; two page-2s; the child's page 3
  EXPECT_EQ(s.pages_shared, 2);
}

TEST(KvSequenceTest, ReleasingLastReferenceFreesPages) {
  PagePool pool(SmallGeometry(), 16);
  {
    KvSequence a(&pool);
    AppendFilled(a, 8, 0.0f);
    {
      KvSequence b = a.Fork();
      KvSequence c = b.Fork();
      EXPECT_EQ(pool.Stats().page_references, 6);
    }
    PagePoolStats s = pool.Stats();
    EXPECT_EQ(s.pages_in_use, 2);
    EXPECT_EQ(s.pages_shared, 0);
    EXPECT_EQ(s.page_references, 2);
  }
  PagePoolStats s = pool.Stats();
  EXPECT_EQ(s.pages_in_use, 0);
  EXPECT_EQ(s.page_references, 0);
}

TEST(KvSequenceTest, TruncateReleasesWholePagesAndCopiesSharedTailOnWrite) {
  PagePool pool(SmallGeometry(), 16);
  KvSequence a(&pool);
  AppendFilled(a, 12, 0.0f);
  KvSequence b = a.Fork();
  b.Truncate(6);  // keeps pages 0 and 1 (1 partial, still shared with a)
  EXPECT_EQ(b.length(), 6);
  EXPECT_EQ(b.num_pages(), 2);
  EXPECT_EQ(pool.Stats().pages_in_use, 3);
  AppendFilled(b, 1, 700.0f);  // position 6 is in shared page 1: copy first
  EXPECT_EQ(ValueAt(b, 6), 706.0f);
  EXPECT_EQ(ValueAt(a, 6), 6.0f) << "the other sequence's KV must not change";
  EXPECT_EQ(ValueAt(b, 5), 5.0f) << "the copy keeps the earlier slots";
  EXPECT_EQ(pool.Stats().pages_in_use, 4);
  b.Truncate(0);
  EXPECT_EQ(b.num_pages(), 0);
  EXPECT_EQ(pool.Stats().pages_in_use, 3);
}

TEST(KvSequenceTest, ExhaustedPoolIsAnErrorAndChangesNothing) {
  PagePool pool(SmallGeometry(), 3);
  KvSequence a(&pool);
  AppendFilled(a, 10, 0.0f);
  KvSequence b = a.Fork();
  // a needs a copy of its shared partial page plus nothing else: pool full.
  absl::Status s = a.PrepareAppend(1);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("3 pages"), absl::string_view::npos) << s;
  EXPECT_EQ(a.length(), 10);
  EXPECT_EQ(a.page_table(), b.page_table());
  for (int p = 0; p < 10; ++p) EXPECT_EQ(ValueAt(a, p), static_cast<float>(p));
  b.Clear();
  EXPECT_TRUE(a.PrepareAppend(1).ok()) << "the freed pages are reusable";
}

TEST(KvSequenceTest, AccountingIsExactOverManyForks) {
  PagePool pool(SmallGeometry(), 64);
  KvSequence root(&pool);
  AppendFilled(root, 16, 0.0f);  // 4 full pages
  std::vector<KvSequence> forks;
  for (int i = 0; i < 8; ++i) forks.push_back(root.Fork());
  for (int i = 0; i < 8; ++i) AppendFilled(forks[i], 2, 100.0f * i);  // one new page each
  PagePoolStats s = pool.Stats();
  EXPECT_EQ(s.pages_in_use, 4 + 8);
  EXPECT_EQ(s.pages_shared, 4);
  EXPECT_EQ(s.page_references, 4 * 9 + 8);
  EXPECT_EQ(s.bytes_in_use(), 12 * static_cast<int64_t>(SmallGeometry().page_bytes()));
  forks.clear();
  root.Clear();
  EXPECT_EQ(pool.Stats().pages_in_use, 0);
}

}  // namespace
}  // namespace kvs

namespace kvs {
namespace {

PageKey Key(uint8_t b) {
  PageKey k{};
  k[0] = b;
  return k;
}

TEST(PrefixCacheTest, ReleasedKeyedPagesStayFindableUntilEvicted) {
  PagePool pool(SmallGeometry(), 3);
  PageId kept;
  {
    KvSequence a(&pool);
    AppendFilled(a, 4, 10.0f);  // one full page
    kept = a.page_table()[0];
    pool.SetKey(kept, Key(1));
  }
  PagePoolStats s = pool.Stats();
  EXPECT_EQ(s.pages_in_use, 0);
  EXPECT_EQ(s.pages_cached, 1);

  // A new sequence with the same prefix takes the page back, contents intact.
  std::optional<PageId> hit = pool.LookupKey(Key(1));
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(*hit, kept);
  KvSequence b(&pool);
  b.AppendPage(*hit);
  EXPECT_EQ(b.length(), 4);
  EXPECT_EQ(ValueAt(b, 3), 13.0f);
  EXPECT_EQ(pool.Stats().pages_cached, 0);
  EXPECT_FALSE(pool.LookupKey(Key(2)).has_value());

  // A second lookup while in use shares it.
  std::optional<PageId> again = pool.LookupKey(Key(1));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(pool.Stats().pages_shared, 1);
  pool.Release(*again);
}

TEST(PrefixCacheTest, AllocationEvictsTheOldestCachedPageFirst) {
  PagePool pool(SmallGeometry(), 2);
  for (uint8_t k : {1, 2}) {
    KvSequence s(&pool);
    AppendFilled(s, 4, 0.0f);
    pool.SetKey(s.page_table()[0], Key(k));
  }
  EXPECT_EQ(pool.Stats().pages_cached, 2);
  absl::StatusOr<PageId> p = pool.Allocate();  // pool full: evicts key 1 (freed first)
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(pool.LookupKey(Key(1)).has_value());
  std::optional<PageId> two = pool.LookupKey(Key(2));
  EXPECT_TRUE(two.has_value());
  EXPECT_EQ(pool.Allocate().status().code(), absl::StatusCode::kResourceExhausted);
  pool.Release(*p);
  pool.Release(*two);
}

TEST(PrefixCacheTest, WritingIntoAKeyedPageCopiesIt) {
  PagePool pool(SmallGeometry(), 8);
  KvSequence a(&pool);
  AppendFilled(a, 6, 0.0f);
  a.Truncate(4);  // page 0 full, keyed; page 1 dropped
  const PageId keyed = a.page_table()[0];
  pool.SetKey(keyed, Key(7));
  a.Truncate(3);  // now the next write lands in the keyed page
  AppendFilled(a, 1, 500.0f);
  EXPECT_NE(a.page_table()[0], keyed) << "a keyed page is immutable";
  EXPECT_EQ(ValueAt(a, 3), 503.0f);
  std::optional<PageId> hit = pool.LookupKey(Key(7));
  ASSERT_TRUE(hit.has_value());
  KvSequence b(&pool);
  b.AppendPage(*hit);
  EXPECT_EQ(ValueAt(b, 3), 3.0f) << "the cached page kept its original content";
}

TEST(KvSequenceTest, ItsPagesAndItsForksCountForItsOwnerAndItsSharedCountFollowsTheTable) {
  PagePool pool(SmallGeometry(), 16);
  const PageOwner owner = 3;
  std::shared_ptr<const std::atomic<int>> count;
  {
    KvSequence seq(&pool, owner);
    count = seq.shared_page_count();
    auto seen = [&] { return count->load(); };
    AppendFilled(seq, 6, 1.0f);  // 2 pages
    EXPECT_EQ(seen(), 2);
    EXPECT_EQ(pool.PagesHeldBy(owner), 2);
    KvSequence fork = seq.Fork();
    EXPECT_EQ(fork.owner(), owner);
    EXPECT_EQ(fork.shared_page_count()->load(), 2);
    AppendFilled(fork, 1, 5.0f);  // copies the shared last page
    EXPECT_EQ(pool.PagesHeldBy(owner), 3) << "the shared page once, the fork's copy";
    ASSERT_TRUE(seq.PrepareAppend(5).ok());  // reserves a third page
    EXPECT_EQ(seen(), 3);
    seq.Truncate(3);
    EXPECT_EQ(seen(), 1);
    std::vector<PageId> pages;
    std::vector<bool> found;
    const std::optional<PageKey> keys[] = {std::nullopt, std::nullopt, std::nullopt};
    ASSERT_TRUE(pool.TakePages(keys, &pages, &found, nullptr, owner).ok());
    seq.Adopt(pages, 10);
    EXPECT_EQ(seen(), 3);
    EXPECT_EQ(pool.PagesHeldBy(owner), 5) << "the fork's 2, the adopted 3";
    KvSequence moved = std::move(seq);
    EXPECT_EQ(moved.shared_page_count(), count) << "the count moves with the table";
    moved.Clear();
    EXPECT_EQ(seen(), 0);
    EXPECT_EQ(pool.PagesHeldBy(owner), 2);
  }
  EXPECT_EQ(pool.PagesHeldBy(owner), 0);
  EXPECT_EQ(count->load(), 0) << "readable after the sequence is gone";
  EXPECT_EQ(pool.PagesHeldBy(kNoPageOwner), 0);
}

}  // namespace
}  // namespace kvs
