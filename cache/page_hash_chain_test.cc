// PageHashChain: incremental hashing gives exactly ChainPageHashes, hashing
// each page once.
#include "cache/page_hash_chain.h"

#include <numeric>

#include "gtest/gtest.h"

namespace kvs {
namespace {

KvGeometry Geometry() {
  return {.n_layers = 3, .n_kv_heads = 2, .head_dim = 8, .page_tokens = 4, .dtype = KvDtype::kF16};
}

std::vector<int32_t> Iota(int n, int32_t first = 100) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(PageHashChainTest, GrowingTokenByTokenGivesTheFullRecomputationAtEveryLength) {
  const std::vector<int32_t> tokens = Iota(23);
  PageHashChain chain("model-a", Geometry());
  for (int n = 0; n <= 23; ++n) {
    const std::span<const int32_t> prefix = std::span<const int32_t>(tokens).first(n);
    EXPECT_EQ(chain.PageHashes(prefix, n), ChainPageHashes("model-a", Geometry(), prefix, n))
        << n;
    EXPECT_EQ(chain.size(), n / 4);
  }
}

TEST(PageHashChainTest, ExtendHashesOnlyThePagesItDoesNotHold) {
  const std::vector<int32_t> tokens = Iota(40);
  PageHashChain chain("model-a", Geometry());
  EXPECT_EQ(chain.Extend(std::span<const int32_t>(tokens).first(17)), 4);
  EXPECT_EQ(chain.pages_hashed(), 4);
  EXPECT_EQ(chain.Extend(std::span<const int32_t>(tokens).first(19)), 0);
  EXPECT_EQ(chain.Extend(tokens), 6);
  EXPECT_EQ(chain.pages_hashed(), 10);
  const std::vector<PageHash> want = ChainPageHashes("model-a", Geometry(), tokens, 40);
  EXPECT_EQ(std::vector<PageHash>(chain.hashes().begin(), chain.hashes().end()), want);
}

TEST(PageHashChainTest, ExtendStopsAtMaxPages) {
  const std::vector<int32_t> tokens = Iota(40);
  PageHashChain chain("model-a", Geometry());
  EXPECT_EQ(chain.Extend(tokens, 3), 3);
  EXPECT_EQ(chain.size(), 3);
}

TEST(PageHashChainTest, NextPageHashIsTheTailHashAndLeavesTheChainAlone) {
  const std::vector<int32_t> tokens = Iota(10);
  PageHashChain chain("model-a", Geometry());
  chain.Extend(tokens);
  ASSERT_EQ(chain.size(), 2);
  const std::vector<PageHash> want = ChainPageHashes("model-a", Geometry(), tokens, 10);
  EXPECT_EQ(chain.NextPageHash(std::span<const int32_t>(tokens).subspan(8)), want[2]);
  EXPECT_EQ(chain.size(), 2);
}

TEST(PageHashChainTest, TruncateThenExtendFollowsTheNewTokens) {
  std::vector<int32_t> tokens = Iota(16);
  PageHashChain chain("model-a", Geometry());
  chain.Extend(tokens);
  chain.Truncate(2);
  EXPECT_EQ(chain.size(), 2);
  tokens[9] = 7;  // page 2 changes
  EXPECT_EQ(chain.Extend(tokens), 2);
  const std::vector<PageHash> want = ChainPageHashes("model-a", Geometry(), tokens, 16);
  EXPECT_EQ(std::vector<PageHash>(chain.hashes().begin(), chain.hashes().end()), want);
  chain.Truncate(9);  // beyond the end: no change
  EXPECT_EQ(chain.size(), 4);
}

TEST(PageHashChainTest, AdoptedHashesAreNotRehashedAndSeedTheNextPage) {
  const std::vector<int32_t> tokens = Iota(16);
  const std::vector<PageHash> want = ChainPageHashes("model-a", Geometry(), tokens, 16);
  PageHashChain chain("model-a", Geometry());
  chain.Adopt(std::span<const PageHash>(want).first(3));
  EXPECT_EQ(chain.pages_hashed(), 0);
  EXPECT_EQ(chain.Extend(tokens), 1);
  EXPECT_EQ(chain.hashes().back(), want[3]);
}

}  // namespace
}  // namespace kvs

namespace kvs {
namespace {

TEST(PageHashChainSaltTest, ASaltedChainKeepsThePagesBeforeTheSaltAndDivergesFromItOn) {
  const std::vector<int32_t> tokens = Iota(20);
  const std::vector<PageHash> fresh = ChainPageHashes("model-a", Geometry(), tokens, 20);
  const PageHash salt = SlideSalt(fresh[3], 1, 2);
  PageHashChain chain("model-a", Geometry());
  chain.Extend(std::span<const int32_t>(tokens).first(4));
  chain.SetSalt({1, salt});
  const std::vector<PageHash> salted = chain.PageHashes(tokens, 18);
  ASSERT_EQ(salted.size(), 5u);
  EXPECT_EQ(salted[0], fresh[0]);
  for (int i = 1; i < 5; ++i) EXPECT_NE(salted[i], fresh[i]) << i;
  EXPECT_EQ(salted[1], ChainPageHash(salt, "model-a", Geometry(), std::span<const int32_t>(tokens).subspan(4, 4)));
  // The same slide of the same history gives the same hashes; another
  // history (or another cut) does not.
  PageHashChain again("model-a", Geometry());
  again.SetSalt({1, SlideSalt(fresh[3], 1, 2)});
  EXPECT_EQ(again.PageHashes(tokens, 18), salted);
  EXPECT_NE(SlideSalt(fresh[3], 1, 3), salt);
  EXPECT_NE(SlideSalt(fresh[2], 1, 2), salt);
}

TEST(PageHashChainSaltTest, TruncatingBelowTheSaltedPageForgetsTheSalt) {
  const std::vector<int32_t> tokens = Iota(20);
  PageHashChain chain("model-a", Geometry());
  chain.SetSalt({2, SlideSalt(PageHash{}, 2, 1)});
  chain.Extend(tokens);
  chain.Truncate(2);
  EXPECT_TRUE(chain.salt().has_value());
  chain.Truncate(1);
  EXPECT_FALSE(chain.salt().has_value());
  chain.Extend(tokens);
  EXPECT_EQ(std::vector<PageHash>(chain.hashes().begin(), chain.hashes().end()),
            ChainPageHashes("model-a", Geometry(), tokens, 20));
}

}  // namespace
}  // namespace kvs
