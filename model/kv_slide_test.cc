// SlideKv and PlanSlide on real KV pages of a real model
// (../shared/models/tiny-llama-q8_0.gguf).
#include "model/kv_slide.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/page_codec_test_util.h"
#include "gtest/gtest.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "model/transformer.h"

namespace kvs {
namespace {

constexpr int kT = 8;  // tokens per page

std::vector<uint8_t> Bytes(const PagePool& pool, PageId p) {
  return std::vector<uint8_t>(pool.data(p), pool.data(p) + pool.geometry().page_bytes());
}

class KvSlideTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = Model::Load(absl::StrCat(KVS_SHARED_DIR, "/models/tiny-llama-q8_0.gguf"));
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    const ModelConfig& c = model_->config();
    geometry_ = {c.n_layers, c.n_kv_heads, c.head_dim, kT, KvDtype::kF32};
    rotation_ = std::make_unique<KeyRotation>(c, model_->weights());
    transformer_ = std::make_unique<Transformer>(c, model_->weights(), &threads_, 256, 64);
  }

  // Appends `n` tokens to `kv`; returns the greedy next token.
  int32_t Feed(KvSequence* kv, const std::vector<int32_t>& tokens) {
    EXPECT_TRUE(kv->PrepareAppend(static_cast<int>(tokens.size())).ok());
    ForwardItem item{kv, tokens};
    std::vector<float> logits(model_->config().vocab_size);
    absl::Status s = transformer_->Forward({&item, 1}, logits.data());
    EXPECT_TRUE(s.ok()) << s;
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  std::vector<int32_t> Tokens(int n) {
    std::vector<int32_t> v;
    for (int i = 0; i < n; ++i) v.push_back((3 + 17 * i) % model_->config().vocab_size);
    return v;
  }

  ThreadPool threads_{2};
  std::unique_ptr<Model> model_;
  KvGeometry geometry_;
  std::unique_ptr<KeyRotation> rotation_;
  std::unique_ptr<Transformer> transformer_;
};

TEST_F(KvSlideTest, PlanKeepsKeepTokensRoundedUpToAPageAndDropsHalfTheRest) {
  absl::StatusOr<SlidePlan> p = PlanSlide(64, 64, 5, 8);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->keep_pages, 1);
  EXPECT_EQ(p->drop_pages, 3);  // 7 pages after the kept one, half rounded down
  p = PlanSlide(64, 64, 0, 8);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->keep_pages, 0);
  EXPECT_EQ(p->drop_pages, 4);
  p = PlanSlide(64, 64, 56, 8);  // one page after the kept ones: it goes
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->drop_pages, 1);
  EXPECT_EQ(PlanSlide(64, 64, 57, 8).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(PlanSlide(20, 64, 5, 8).status().code(), absl::StatusCode::kOutOfRange);
}

TEST_F(KvSlideTest, DropsWholePagesAfterTheKeptOnesAndTurnsTheRestIntoThePositionsTheyMoveTo) {
  PagePool pool(geometry_, 32);
  KvSequence kv(&pool);
  Feed(&kv, Tokens(45));  // pages 0..5, the last holding 5 tokens
  const std::vector<PageId> before = kv.page_table();
  pool.SetKey(before[3], PageKey{3});  // in the prefix cache, ours alone
  std::vector<std::vector<uint8_t>> want;  // pages 3..5 as they should become
  for (int i = 3; i < 6; ++i) {
    want.push_back(Bytes(pool, before[i]));
    rotation_->Rotate(geometry_, want.back().data(), i == 5 ? 5 : kT, -2 * kT);
  }
  ASSERT_TRUE(SlideKv(*rotation_, {1, 2}, false, &kv).ok());
  EXPECT_EQ(kv.length(), 45 - 16);
  ASSERT_EQ(kv.num_pages(), 4);
  EXPECT_EQ(kv.page_table()[0], before[0]);  // kept, untouched
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Bytes(pool, kv.page_table()[1 + i]), want[i]) << i;
  // Unshared pages are turned in place, out of the prefix cache (the
  // bytes its key named are gone); the dropped ones are free.
  EXPECT_EQ(kv.page_table()[1], before[3]);
  EXPECT_FALSE(pool.has_key(before[3]));
  EXPECT_FALSE(pool.LookupKey(PageKey{3}).has_value());
  EXPECT_EQ(pool.ref_count(before[1]), 0);
  EXPECT_EQ(pool.ref_count(before[2]), 0);
  EXPECT_EQ(pool.Stats().pages_in_use, 4);
}

TEST_F(KvSlideTest, AForkKeepsThePagesItSharesUnchanged) {
  PagePool pool(geometry_, 32);
  KvSequence kv(&pool);
  Feed(&kv, Tokens(40));
  pool.SetKey(kv.page_table()[4], PageKey{1});
  KvSequence fork = kv.Fork();
  std::vector<std::vector<uint8_t>> fork_bytes;
  for (PageId p : fork.page_table()) fork_bytes.push_back(Bytes(pool, p));
  ASSERT_TRUE(SlideKv(*rotation_, {1, 2}, false, &kv).ok());
  EXPECT_EQ(kv.length(), 24);
  // The fork still sees every page as it was.
  for (int i = 0; i < fork.num_pages(); ++i) EXPECT_EQ(Bytes(pool, fork.page_table()[i]), fork_bytes[i]) << i;
  // The kept page is still shared; the moved ones are new pages.
  EXPECT_EQ(kv.page_table()[0], fork.page_table()[0]);
  EXPECT_EQ(pool.ref_count(kv.page_table()[0]), 2);
  for (int i = 1; i < 3; ++i) EXPECT_NE(kv.page_table()[i], fork.page_table()[i + 2]);
  EXPECT_EQ(pool.LookupKey(PageKey{1}), fork.page_table()[4]);  // still keyed
  pool.Release(fork.page_table()[4]);
  // A fork of the slid sequence shares its new pages.
  KvSequence fork2 = kv.Fork();
  EXPECT_EQ(fork2.page_table(), kv.page_table());
}

TEST_F(KvSlideTest, AFullPoolIsResourceExhaustedAndNothingChanges) {
  PagePool pool(geometry_, 5);
  KvSequence kv(&pool);
  Feed(&kv, Tokens(40));  // all 5 pages
  KvSequence fork = kv.Fork();  // every page shared: the moved ones need copies
  const std::vector<PageId> table = kv.page_table();
  absl::Status s = SlideKv(*rotation_, {1, 2}, false, &kv);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(kv.length(), 40);
  EXPECT_EQ(kv.page_table(), table);
  EXPECT_EQ(pool.Stats().pages_in_use, 5);
  EXPECT_EQ(SlideKv(*rotation_, {4, 2}, false, &kv).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SlideKv(*rotation_, {1, 0}, false, &kv).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kv.length(), 40);
}

// The "done when" at the model level: greedy generation of three times the
// context (64 positions here) in a pool of one context's pages (plus the
// one being written), full pages keyed as the service keys them.
TEST_F(KvSlideTest, GenerationContinuesPastTheContextWithBoundedPages) {
  PagePool pool(geometry_, 64 / kT + 1);
  uint8_t next_key = 0;
  KvSequence kv(&pool);
  std::vector<int32_t> tokens = Tokens(12);
  int32_t next = Feed(&kv, tokens);
  int generated = 0, slides = 0;
  int64_t most_pages = 0;
  while (generated < 3 * 64) {
    if (kv.length() == 64) {
      absl::StatusOr<SlidePlan> plan = PlanSlide(kv.length(), 64, 4, kT);
      ASSERT_TRUE(plan.ok()) << plan.status();
      ASSERT_TRUE(SlideKv(*rotation_, *plan, false, &kv).ok());
      ++slides;
    }
    next = Feed(&kv, {next});
    ++generated;
    if (kv.length() % kT == 0) pool.SetKey(kv.page_table()[kv.length() / kT - 1], PageKey{++next_key});
    most_pages = std::max(most_pages, pool.Stats().pages_in_use);
  }
  EXPECT_GE(slides, 5);
  EXPECT_LE(most_pages, 64 / kT);
  EXPECT_LE(kv.length(), 64);
}

// The stored bytes of position `pos` of one (layer, part, head) block, as
// a row (q8_0 blocks through their slot functions: SlotRow).
std::vector<uint8_t> StoredRow(const KvGeometry& g, const uint8_t* page, int slot, int layer, KvPart part,
                               int head) {
  return SlotRow(g, part, page + g.block_offset(layer, part, head), slot);
}

// The rows of position `pos` of one (layer, part, head) block.
std::vector<float> Row(const KvSequence& kv, int pos, int layer, KvPart part, int head) {
  const KvGeometry& g = kv.geometry();
  const std::vector<uint8_t> row =
      StoredRow(g, kv.pool()->data(kv.page_table()[pos / g.page_tokens]), pos % g.page_tokens, layer, part, head);
  std::vector<float> out(g.head_dim);
  LoadKv(g.dtype, row.data(), out.data(), out.size());
  return out;
}

// A chat session's turn-aligned slide moves tokens by a count that is not
// a multiple of T (here keep 5, drop 11, T = 8): every moved row lands in
// its new slot, its key turned as if computed there.
TEST_F(KvSlideTest, ATokenSlideRepacksTheRowsAtTheirNewPositionsWithKeysTurnedByTheShift) {
  PagePool pool(geometry_, 32);
  KvSequence kv(&pool);
  const std::vector<int32_t> tokens = Tokens(45);
  Feed(&kv, tokens);
  KvSequence fork = kv.Fork();  // shares every page: it must see no change
  std::vector<std::vector<uint8_t>> fork_bytes;
  for (PageId p : fork.page_table()) fork_bytes.push_back(Bytes(pool, p));
  const int keep = 5, drop = 11;
  ASSERT_TRUE(SlideKvTokens(*rotation_, {keep, drop}, false, &kv).ok());
  ASSERT_EQ(kv.length(), 45 - drop);
  ASSERT_EQ(kv.num_pages(), 5);
  for (int i = 0; i < fork.num_pages(); ++i) EXPECT_EQ(Bytes(pool, fork.page_table()[i]), fork_bytes[i]) << i;
  // Every page from the partial kept one on is new.
  for (int i = 0; i < kv.num_pages(); ++i) EXPECT_NE(kv.page_table()[i], fork.page_table()[i]) << i;

  // Layer 0's keys and values depend on the token and its position only:
  // a direct prefill of the kept and moved tokens computes them at the new
  // positions.
  std::vector<int32_t> kept_and_moved(tokens.begin(), tokens.begin() + keep);
  kept_and_moved.insert(kept_and_moved.end(), tokens.begin() + keep + drop, tokens.end());
  KvSequence direct(&pool);
  Feed(&direct, kept_and_moved);
  const int heads = geometry_.n_kv_heads;
  for (int pos = 0; pos < kv.length(); ++pos) {
    for (int head = 0; head < heads; ++head) {
      for (KvPart part : {KvPart::kKey, KvPart::kValue}) {
        const std::vector<float> got = Row(kv, pos, 0, part, head), want = Row(direct, pos, 0, part, head);
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + std::fabs(want[i])))
              << "pos " << pos << " head " << head << " part " << static_cast<int>(part);
        }
      }
    }
  }
  // Every layer: kept rows as they were, moved values copied, moved keys
  // the old ones turned by -drop.
  std::vector<std::vector<uint8_t>> turned = fork_bytes;
  for (auto& page : turned) rotation_->Rotate(geometry_, page.data(), kT, -drop);
  auto turned_key = [&](int from, int layer, int head) {
    const uint8_t* p = turned[from / kT].data() + geometry_.block_offset(layer, KvPart::kKey, head) +
                       geometry_.slot_offset(from % kT);
    std::vector<float> out(geometry_.head_dim);
    LoadKv(geometry_.dtype, p, out.data(), out.size());
    return out;
  };
  for (int layer = 0; layer < geometry_.n_layers; ++layer) {
    for (int head = 0; head < heads; ++head) {
      for (int pos = 0; pos < kv.length(); ++pos) {
        const int from = pos < keep ? pos : pos + drop;
        EXPECT_EQ(Row(kv, pos, layer, KvPart::kValue, head), Row(fork, from, layer, KvPart::kValue, head));
        EXPECT_EQ(Row(kv, pos, layer, KvPart::kKey, head),
                  pos < keep ? Row(fork, from, layer, KvPart::kKey, head) : turned_key(from, layer, head))
            << "layer " << layer << " pos " << pos;
      }
    }
  }
  // Generation goes on from the new length.
  Feed(&kv, {7});
  EXPECT_EQ(kv.length(), 45 - drop + 1);
}

// The same slide on a q8_0 cache, whose blocks are not rows: each moved
// key's bytes are the old key's turned by the shift (KeyRotation on the
// fork's pages), each kept key and every value is the fork's, byte for byte.
TEST_F(KvSlideTest, AQ8_0TokenSlideMovesEachPackedKeyToItsNewSlotTurned) {
  const KvGeometry g{geometry_.n_layers, geometry_.n_kv_heads, geometry_.head_dim, 16, KvDtype::kQ8_0};
  PagePool pool(g, 32);
  KvSequence kv(&pool);
  Feed(&kv, Tokens(45));
  KvSequence fork = kv.Fork();
  const int keep = 5, drop = 11;
  ASSERT_TRUE(SlideKvTokens(*rotation_, {keep, drop}, false, &kv).ok());
  ASSERT_EQ(kv.length(), 45 - drop);
  std::vector<std::vector<uint8_t>> turned;
  for (PageId p : fork.page_table()) {
    turned.push_back(Bytes(pool, p));
    rotation_->Rotate(g, turned.back().data(), g.page_tokens, -drop);
  }
  for (int layer = 0; layer < g.n_layers; ++layer) {
    for (int head = 0; head < g.n_kv_heads; ++head) {
      for (int pos = 0; pos < kv.length(); ++pos) {
        const int from = pos < keep ? pos : pos + drop, t = g.page_tokens;
        const uint8_t* page = pool.data(kv.page_table()[pos / t]);
        const uint8_t* old_page = pool.data(fork.page_table()[from / t]);
        EXPECT_EQ(StoredRow(g, page, pos % t, layer, KvPart::kValue, head),
                  StoredRow(g, old_page, from % t, layer, KvPart::kValue, head));
        EXPECT_EQ(StoredRow(g, page, pos % t, layer, KvPart::kKey, head),
                  StoredRow(g, pos < keep ? old_page : turned[from / t].data(), from % t, layer, KvPart::kKey, head))
            << "layer " << layer << " pos " << pos;
      }
    }
  }
  Feed(&kv, {7});  // generation goes on from the new length
  EXPECT_EQ(kv.length(), 45 - drop + 1);
}

TEST_F(KvSlideTest, ATokenSlideKeepsTheKeptFullPagesAndTakesTheFastPathWhenPageAligned) {
  PagePool pool(geometry_, 32);
  KvSequence kv(&pool);
  Feed(&kv, Tokens(45));
  const std::vector<PageId> before = kv.page_table();
  ASSERT_TRUE(SlideKvTokens(*rotation_, {19, 3}, false, &kv).ok());
  EXPECT_EQ(kv.length(), 42);
  EXPECT_EQ(kv.page_table()[0], before[0]);
  EXPECT_EQ(kv.page_table()[1], before[1]);
  EXPECT_EQ(kv.page_table()[2], before[2]);  // keeps 3 of its slots: rebuilt in place
  EXPECT_EQ(pool.Stats().pages_in_use, 6);
  // Whole pages: SlideKv's turn in place (same page ids for unshared pages).
  const std::vector<PageId> mid = kv.page_table();
  ASSERT_TRUE(SlideKvTokens(*rotation_, {8, 16}, false, &kv).ok());
  EXPECT_EQ(kv.length(), 26);
  EXPECT_EQ(kv.page_table()[1], mid[3]);
}

TEST_F(KvSlideTest, ATokenSlideOutsideTheSequenceOrWithoutRoomChangesNothing) {
  PagePool pool(geometry_, 6);
  KvSequence kv(&pool);
  Feed(&kv, Tokens(40));  // 5 of the 6 pages
  KvSequence fork = kv.Fork();  // every page shared: rebuilt pages need new ones
  const std::vector<PageId> table = kv.page_table();
  EXPECT_EQ(SlideKvTokens(*rotation_, {5, 0}, false, &kv).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SlideKvTokens(*rotation_, {30, 11}, false, &kv).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SlideKvTokens(*rotation_, {-1, 3}, false, &kv).code(), absl::StatusCode::kInvalidArgument);
  // Rebuilding pages 0..3 needs 4 new pages; only 1 is free.
  EXPECT_EQ(SlideKvTokens(*rotation_, {3, 5}, false, &kv).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(kv.length(), 40);
  EXPECT_EQ(kv.page_table(), table);
  EXPECT_EQ(pool.Stats().pages_in_use, 5);
}

// Pages the sequence holds alone are rebuilt in place, with the same bytes
// a rebuild into new pages gives, and no extra page.
TEST_F(KvSlideTest, AnUnsharedTokenSlideRebuildsInPlaceAndMatchesTheCopy) {
  PagePool pool(geometry_, 32);
  KvSequence alone(&pool), shared(&pool);
  Feed(&alone, Tokens(45));
  Feed(&shared, Tokens(45));
  KvSequence fork = shared.Fork();
  const std::vector<PageId> before = alone.page_table();
  pool.SetKey(before[1], PageKey{7});
  const int64_t in_use = pool.Stats().pages_in_use;
  ASSERT_TRUE(SlideKvTokens(*rotation_, {5, 11}, false, &alone).ok());
  EXPECT_EQ(pool.ref_count(before[5]), 0);  // no longer needed
  ASSERT_TRUE(SlideKvTokens(*rotation_, {5, 11}, false, &shared).ok());
  ASSERT_EQ(alone.num_pages(), shared.num_pages());
  for (int i = 0; i < alone.num_pages(); ++i) EXPECT_EQ(alone.page_table()[i], before[i]) << i;
  for (int layer = 0; layer < geometry_.n_layers; ++layer) {
    for (int head = 0; head < geometry_.n_kv_heads; ++head) {
      for (KvPart part : {KvPart::kKey, KvPart::kValue}) {
        for (int pos = 0; pos < alone.length(); ++pos) {
          ASSERT_EQ(Row(alone, pos, layer, part, head), Row(shared, pos, layer, part, head))
              << "layer " << layer << " pos " << pos;
        }
      }
    }
  }
  EXPECT_FALSE(pool.LookupKey(PageKey{7}).has_value());  // its bytes changed
  // alone: one page fewer; shared: 5 rebuilt pages beside the fork's 6.
  EXPECT_EQ(pool.Stats().pages_in_use, in_use - 1 + 5);
}

}  // namespace
}  // namespace kvs
