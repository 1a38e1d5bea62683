// Page hashes: the chain property, what the hash depends on, and the exact
// hashed bytes documented in docs/storage-format.md.
#include "cache/page_hash.h"

#include <openssl/evp.h>

#include <numeric>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"

namespace kvs {
namespace {

KvGeometry Geometry() {
  return {.n_layers = 3, .n_kv_heads = 2, .head_dim = 8, .page_tokens = 16, .dtype = KvDtype::kF16};
}

std::vector<int32_t> Iota(int n, int32_t first = 100) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<PageHash> Hashes(const std::vector<int32_t>& tokens, int kv_length,
                             std::string_view fp = "model-a", const KvGeometry& g = Geometry()) {
  return ChainPageHashes(fp, g, tokens, kv_length);
}

TEST(PageHashTest, OneHashPerPageCoveringKvLength) {
  const std::vector<int32_t> tokens = Iota(100);
  EXPECT_TRUE(Hashes(tokens, 0).empty());
  EXPECT_EQ(Hashes(tokens, 1).size(), 1u);
  EXPECT_EQ(Hashes(tokens, 16).size(), 1u);
  EXPECT_EQ(Hashes(tokens, 17).size(), 2u);
  EXPECT_EQ(Hashes(tokens, 100).size(), 7u);
}

TEST(PageHashTest, ChainOfSinglePageHashes) {
  const std::vector<int32_t> tokens = Iota(40);
  const std::vector<PageHash> chain = Hashes(tokens, 40);
  PageHash previous;  // zeros
  for (size_t i = 0; i < chain.size(); ++i) {
    const size_t begin = i * 16;
    const size_t n = std::min<size_t>(16, 40 - begin);
    previous = ChainPageHash(previous, "model-a", Geometry(),
                             std::span<const int32_t>(tokens).subspan(begin, n));
    EXPECT_EQ(chain[i], previous) << i;
  }
}

TEST(PageHashTest, EqualPrefixesGiveEqualPageHashes) {
  std::vector<int32_t> a = Iota(64);
  std::vector<int32_t> b = a;
  for (int i = 40; i < 64; ++i) b[i] = 7;  // diverge inside page 2
  const std::vector<PageHash> ha = Hashes(a, 64), hb = Hashes(b, 64);
  EXPECT_EQ(ha[0], hb[0]);
  EXPECT_EQ(ha[1], hb[1]);
  EXPECT_NE(ha[2], hb[2]);
  EXPECT_NE(ha[3], hb[3]);
  // Different lengths of the same tokens share their full pages.
  EXPECT_EQ(Hashes(a, 35)[1], ha[1]);
}

TEST(PageHashTest, OneTokenChangesThatPageAndEveryLaterOne) {
  const std::vector<int32_t> base = Iota(80);
  const std::vector<PageHash> hb = Hashes(base, 80);
  for (int pos : {0, 15, 16, 37, 79}) {
    std::vector<int32_t> changed = base;
    changed[pos] += 1;
    const std::vector<PageHash> hc = Hashes(changed, 80);
    for (int page = 0; page < 5; ++page) {
      if (page < pos / 16) {
        EXPECT_EQ(hc[page], hb[page]) << pos << " " << page;
      } else {
        EXPECT_NE(hc[page], hb[page]) << pos << " " << page;
      }
    }
  }
}

TEST(PageHashTest, PartialPageDiffersFromTheFullPageItBecomes) {
  const std::vector<int32_t> tokens = Iota(32);
  const std::vector<PageHash> partial = Hashes(tokens, 20), full = Hashes(tokens, 32);
  EXPECT_EQ(partial[0], full[0]);
  EXPECT_NE(partial[1], full[1]);
}

TEST(PageHashTest, ModelAndEveryGeometryFieldMatter) {
  const std::vector<int32_t> tokens = Iota(16);
  const PageHash base = Hashes(tokens, 16)[0];
  EXPECT_NE(Hashes(tokens, 16, "model-b")[0], base);
  EXPECT_NE(Hashes(tokens, 16, "")[0], base);
  std::vector<KvGeometry> variants(5, Geometry());
  variants[0].n_layers += 1;
  variants[1].n_kv_heads += 1;
  variants[2].head_dim += 1;
  variants[3].page_tokens = 32;
  variants[4].dtype = KvDtype::kF32;
  absl::flat_hash_set<PageHash> seen = {base};
  for (const KvGeometry& g : variants) EXPECT_TRUE(seen.insert(Hashes(tokens, 16, "model-a", g)[0]).second);
}

TEST(PageHashTest, HashesTheDocumentedMessage) {
  // docs/storage-format.md, "Page hashes": tag, previous, u64 fingerprint
  // length, fingerprint, five u32 geometry fields, u32 token count, tokens.
  const std::vector<int32_t> tokens = {1, -2, 300};
  PageHash previous;
  previous.bytes[0] = 0xAB;
  std::vector<uint8_t> m;
  auto le = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) m.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  for (char c : std::string("kvsession.page.v1")) m.push_back(static_cast<uint8_t>(c));
  m.insert(m.end(), previous.bytes.begin(), previous.bytes.end());
  le(2, 8);
  m.push_back('f');
  m.push_back('p');
  for (uint32_t f : {3u, 2u, 8u, 16u, 1u, 3u}) le(f, 4);
  for (int32_t t : tokens) le(static_cast<uint32_t>(t), 4);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  ASSERT_EQ(EVP_Digest(m.data(), m.size(), digest, &len, EVP_sha256(), nullptr), 1);
  PageHash expected;
  std::copy(digest, digest + 16, expected.bytes.begin());
  EXPECT_EQ(ChainPageHash(previous, "fp", Geometry(), tokens), expected);
}

TEST(PageHashTest, HexAndBytes) {
  PageHash h;
  for (int i = 0; i < 16; ++i) h.bytes[i] = static_cast<uint8_t>(i * 17);
  EXPECT_EQ(h.hex(), "00112233445566778899aabbccddeeff");
  EXPECT_EQ(PageHash::FromBytes(h.view()), h);
  EXPECT_FALSE(PageHash::FromBytes("short").has_value());
  PageHash bigger = h;
  bigger.bytes[14] = 0xFF;
  EXPECT_LT(h, bigger);
}

}  // namespace
}  // namespace kvs
