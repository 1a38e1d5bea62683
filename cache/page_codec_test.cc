// Page codec: round trips of full and partial pages, the documented header
// layout, and DATA_LOSS (never a crash) for every corruption and truncation.
// A q8_0 page's blocks are not rows in RAM (kernels/q8_0_kv_blocks.h):
// written as they are in a full page (format 3), as rows in a partial one,
// and full pages of formats 1 (rows) and 2 (keys as in RAM, values rows),
// from before, still read.
#include "cache/page_codec.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/crc32c.h"
#include "gtest/gtest.h"
#include "cache/page_codec_test_util.h"
#include "kernels/q8_0_kv_blocks.h"

namespace kvs {
namespace {

// Small pages; q8_0 rows are blocks of 32 values, so its head_dim is 32,
// and its pages hold whole key groups of 16 tokens.
KvGeometry Geometry(KvDtype dtype) {
  const bool q8_0 = dtype == KvDtype::kQ8_0;
  return {.n_layers = 2, .n_kv_heads = 3, .head_dim = q8_0 ? 32 : 4, .page_tokens = q8_0 ? 16 : 5, .dtype = dtype};
}

// A page whose every byte is distinct from its neighbours'.
std::vector<uint8_t> PatternPage(const KvGeometry& g, uint8_t seed) {
  std::vector<uint8_t> page(g.page_bytes());
  for (size_t i = 0; i < page.size(); ++i) page[i] = static_cast<uint8_t>(i * 31 + seed);
  return page;
}

// Whether `got` equals `want` in the first n slots of every block and
// equals `untouched` in the rest.
void ExpectSlots(const KvGeometry& g, const std::vector<uint8_t>& got,
                 const std::vector<uint8_t>& want, const std::vector<uint8_t>& untouched, int n) {
  for (int layer = 0; layer < g.n_layers; ++layer) {
    for (KvPart part : {KvPart::kKey, KvPart::kValue}) {
      for (int head = 0; head < g.n_kv_heads; ++head) {
        // Slot by slot (the slots of a block own all its bytes, in every layout).
        const size_t block = g.block_offset(layer, part, head);
        for (int slot = 0; slot < g.page_tokens; ++slot) {
          const std::vector<uint8_t>& expected = slot < n ? want : untouched;
          EXPECT_EQ(SlotRow(g, part, got.data() + block, slot), SlotRow(g, part, expected.data() + block, slot))
              << "layer " << layer << " part " << static_cast<int>(part) << " head " << head << " slot " << slot;
        }
      }
    }
  }
}

class PageCodecTest : public testing::TestWithParam<KvDtype> {};

TEST_P(PageCodecTest, RoundTripsFullAndPartialPages) {
  const KvGeometry g = Geometry(GetParam());
  const std::vector<uint8_t> page = PatternPage(g, 1);
  for (int n = 1; n <= g.page_tokens; ++n) {
    const std::string encoded = EncodePage(g, page.data(), n);
    EXPECT_EQ(encoded.size(), EncodedPageBytes(g, n));
    EXPECT_EQ(encoded.size(), kPageHeaderBytes + n * g.bytes_per_token());
    const std::vector<uint8_t> before = PatternPage(g, 99);
    std::vector<uint8_t> decoded = before;
    int n_tokens = 0;
    ASSERT_TRUE(DecodePage(g, encoded, decoded.data(), &n_tokens).ok()) << n;
    EXPECT_EQ(n_tokens, n);
    ExpectSlots(g, decoded, page, before, n);
  }
}

TEST_P(PageCodecTest, PartsAreEncodePagesBytesAndAFullPagesPayloadIsThePageItself) {
  const KvGeometry g = Geometry(GetParam());
  const std::vector<uint8_t> page = PatternPage(g, 7);
  for (int n = 1; n <= g.page_tokens; ++n) {
    const std::string whole = EncodePage(g, page.data(), n);
    const PageEncoding parts = EncodePageParts(g, page.data(), n);
    EXPECT_EQ(parts.header().size(), kPageHeaderBytes) << n;
    EXPECT_EQ(parts.size(), whole.size()) << n;
    EXPECT_EQ(std::string(parts.header()) + std::string(parts.payload()), whole) << n;
    absl::StatusOr<EncodedPageInfo> info = ReadPageHeaderOfParts(parts);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->n_tokens, n);
  }
  // Written without a copy: the full page's payload is the caller's memory.
  const PageEncoding full = EncodePageParts(g, page.data(), g.page_tokens);
  EXPECT_EQ(static_cast<const void*>(full.payload().data()), static_cast<const void*>(page.data()));
  EXPECT_EQ(full.payload().size(), g.page_bytes());
}

TEST_P(PageCodecTest, AnEncodingPassedAsAStringIsItsOwnParts) {
  const KvGeometry g = Geometry(GetParam());
  const std::string whole = EncodePage(g, PatternPage(g, 3).data(), 2);
  const PageEncoding parts = whole;
  EXPECT_EQ(parts.header(), std::string_view(whole).substr(0, kPageHeaderBytes));
  EXPECT_EQ(parts.payload(), std::string_view(whole).substr(kPageHeaderBytes));
  // A payload one byte short is caught by the header check, as for a string.
  const PageEncoding short_payload(std::string(parts.header()), parts.payload().substr(1));
  EXPECT_TRUE(absl::IsDataLoss(ReadPageHeaderOfParts(short_payload).status()));
  EXPECT_TRUE(absl::IsDataLoss(ReadPageHeaderOfParts(PageEncoding(whole.substr(0, 10))).status()));
}

TEST_P(PageCodecTest, HeaderHasTheDocumentedLayout) {
  const KvGeometry g = Geometry(GetParam());
  const std::vector<uint8_t> page = PatternPage(g, 2);
  const std::string e = EncodePage(g, page.data(), 3);
  auto u32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(e[at + i])} << (8 * i);
    return v;
  };
  EXPECT_EQ(e.substr(0, 4), "KVPG");
  EXPECT_EQ(u32(4), kPageFormatVersion);
  EXPECT_EQ(u32(8), 2u);
  EXPECT_EQ(u32(12), 3u);
  EXPECT_EQ(u32(16), static_cast<uint32_t>(g.head_dim));
  EXPECT_EQ(u32(20), static_cast<uint32_t>(g.page_tokens));
  EXPECT_EQ(u32(24), static_cast<uint32_t>(GetParam()));
  EXPECT_EQ(u32(28), 3u);
  EXPECT_EQ(u32(32), PagePayloadBytes(g, 3));
  EXPECT_EQ(u32(36), 0u);
  // The payload starts with slot 0..2 of (layer 0, key, head 0), as rows.
  for (int slot = 0; slot < 3; ++slot) {
    const std::vector<uint8_t> row = SlotRow(g, KvPart::kKey, page.data(), slot);
    EXPECT_EQ(0, std::memcmp(e.data() + kPageHeaderBytes + g.slot_offset(slot), row.data(), row.size())) << slot;
  }
}

TEST_P(PageCodecTest, EverySingleByteCorruptionIsDataLoss) {
  const KvGeometry g = Geometry(GetParam());
  const std::vector<uint8_t> page = PatternPage(g, 3);
  for (int n : {1, g.page_tokens}) {
    const std::string encoded = EncodePage(g, page.data(), n);
    const std::vector<uint8_t> before = PatternPage(g, 77);
    for (size_t at = 0; at < encoded.size(); ++at) {
      for (uint8_t flip : {0x01, 0x80, 0xFF}) {
        std::string bad = encoded;
        bad[at] = static_cast<char>(bad[at] ^ flip);
        std::vector<uint8_t> out = before;
        int n_tokens = -1;
        const absl::Status s = DecodePage(g, bad, out.data(), &n_tokens);
        ASSERT_TRUE(absl::IsDataLoss(s)) << "byte " << at << ": " << s;
        ASSERT_EQ(out, before) << "byte " << at;
        ASSERT_EQ(n_tokens, -1);
      }
    }
  }
}

TEST_P(PageCodecTest, EveryTruncationAndExtensionIsDataLoss) {
  const KvGeometry g = Geometry(GetParam());
  const std::vector<uint8_t> page = PatternPage(g, 4);
  const std::string encoded = EncodePage(g, page.data(), 2);
  std::vector<uint8_t> out(g.page_bytes());
  int n_tokens = 0;
  for (size_t len = 0; len < encoded.size(); ++len) {
    const absl::Status s = DecodePage(g, std::string_view(encoded).substr(0, len), out.data(),
                                      &n_tokens);
    ASSERT_TRUE(absl::IsDataLoss(s)) << len << ": " << s;
  }
  EXPECT_TRUE(absl::IsDataLoss(DecodePage(g, encoded + '\0', out.data(), &n_tokens)));
}

TEST_P(PageCodecTest, OtherGeometryIsDataLoss) {
  const KvGeometry g = Geometry(GetParam());
  const std::vector<uint8_t> page = PatternPage(g, 5);
  const std::string encoded = EncodePage(g, page.data(), 2);
  KvGeometry other = g;
  other.head_dim = 2 * g.head_dim;
  std::vector<uint8_t> out(other.page_bytes());
  int n_tokens = 0;
  const absl::Status s = DecodePage(other, encoded, out.data(), &n_tokens);
  EXPECT_TRUE(absl::IsDataLoss(s));
  EXPECT_NE(s.message().find("geometry"), std::string::npos) << s;
  // The encoding on its own is fine.
  absl::StatusOr<EncodedPageInfo> info = CheckEncodedPage(encoded);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->geometry, g);
  EXPECT_EQ(info->n_tokens, 2);
}

TEST_P(PageCodecTest, DecodePageIntoCopiesWhatDecodePageCopies) {
  const KvGeometry g = Geometry(GetParam());
  const std::vector<uint8_t> page = PatternPage(g, 6);
  for (int n = 1; n <= g.page_tokens; ++n) {
    const std::string encoded = EncodePage(g, page.data(), n);
    std::vector<uint8_t> want = PatternPage(g, 50), got = want;
    int want_tokens = 0, got_tokens = 0;
    ASSERT_TRUE(DecodePage(g, encoded, want.data(), &want_tokens).ok());
    ASSERT_TRUE(DecodePageInto(g, encoded, got.data(), &got_tokens).ok()) << n;
    EXPECT_EQ(got, want) << n;
    EXPECT_EQ(got_tokens, n);
  }
}

TEST_P(PageCodecTest, DecodePageIntoFindsEverySingleByteCorruption) {
  const KvGeometry g = Geometry(GetParam());
  const std::vector<uint8_t> page = PatternPage(g, 7);
  const std::string encoded = EncodePage(g, page.data(), g.page_tokens);
  std::vector<uint8_t> out(g.page_bytes());
  for (size_t at = 0; at < encoded.size(); ++at) {
    std::string bad = encoded;
    bad[at] = static_cast<char>(bad[at] ^ 0x10);
    int n_tokens = -1;
    const absl::Status s = DecodePageInto(g, bad, out.data(), &n_tokens);
    ASSERT_TRUE(absl::IsDataLoss(s)) << "byte " << at << ": " << s;
    ASSERT_EQ(n_tokens, -1);
  }
  int n_tokens = 0;
  EXPECT_TRUE(absl::IsDataLoss(DecodePageInto(g, encoded + '\0', out.data(), &n_tokens)));
  EXPECT_TRUE(absl::IsDataLoss(
      DecodePageInto(g, std::string_view(encoded).substr(0, encoded.size() - 1), out.data(), &n_tokens)));
}

TEST(PageCodecLongPageTest, DecodePageIntoChecksALargePageInRuns) {
  // A Qwen3-0.6B-sized page (28 layers, 8 heads, 128 dims, 16 tokens, f16):
  // the payload is checked in several runs, whose checksums must chain.
  const KvGeometry g{.n_layers = 28, .n_kv_heads = 8, .head_dim = 128, .page_tokens = 16,
                     .dtype = KvDtype::kF16};
  const std::vector<uint8_t> page = PatternPage(g, 8);
  for (int n : {1, 7, 16}) {
    const std::string encoded = EncodePage(g, page.data(), n);
    std::vector<uint8_t> want(g.page_bytes(), 0), got(g.page_bytes(), 0);
    int tokens = 0;
    ASSERT_TRUE(DecodePage(g, encoded, want.data(), &tokens).ok());
    ASSERT_TRUE(DecodePageInto(g, encoded, got.data(), &tokens).ok()) << n;
    EXPECT_EQ(got, want);
    std::string bad = encoded;
    bad[bad.size() - 5] ^= 1;
    EXPECT_TRUE(absl::IsDataLoss(DecodePageInto(g, bad, got.data(), &tokens)));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PageCodecTest,
                         testing::Values(KvDtype::kF16, KvDtype::kF32, KvDtype::kBF16, KvDtype::kQ8_0),
                         [](const testing::TestParamInfo<KvDtype>& info) {
                           return std::string(KvDtypeName(info.param));
                         });

TEST(PageCodecHeaderTest, MessagesNameTheMismatch) {
  const KvGeometry g = Geometry(KvDtype::kF16);
  const std::vector<uint8_t> page = PatternPage(g, 6);
  const std::string encoded = EncodePage(g, page.data(), 5);
  std::string bad_magic = encoded;
  bad_magic[0] = 'X';
  std::string bad_payload = encoded;
  bad_payload[kPageHeaderBytes + 10] ^= 1;
  const std::pair<std::string, std::string> cases[] = {
      {encoded.substr(0, 10), "header"},
      {bad_magic, "magic"},
      {bad_payload, "payload checksum"},
      {encoded.substr(0, encoded.size() - 1), "truncated"},
  };
  for (const auto& [bytes, words] : cases) {
    const absl::Status s = CheckEncodedPage(bytes).status();
    EXPECT_TRUE(absl::IsDataLoss(s));
    EXPECT_NE(s.message().find(words), std::string::npos) << s;
  }
  // ReadPageHeader does not look at the payload.
  EXPECT_TRUE(ReadPageHeader(bad_payload).ok());
}

TEST(PageCodecHeaderTest, ValidateGeometry) {
  EXPECT_TRUE(ValidateGeometry(Geometry(KvDtype::kF32)).ok());
  KvGeometry g = Geometry(KvDtype::kF16);
  g.n_layers = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateGeometry(g)));
  g = Geometry(KvDtype::kF16);
  g.dtype = static_cast<KvDtype>(7);
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateGeometry(g)));
  g = Geometry(KvDtype::kF16);
  g.dtype = KvDtype::kQ8_0;  // head_dim 4: not whole blocks of 32
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateGeometry(g)));
  g.head_dim = 64;  // pages of 5 tokens: not whole key groups of 16
  const absl::Status groups = ValidateGeometry(g);
  EXPECT_TRUE(absl::IsInvalidArgument(groups));
  EXPECT_NE(groups.message().find("page_tokens = 5"), std::string::npos) << groups;
  g.page_tokens = 32;
  EXPECT_TRUE(ValidateGeometry(g).ok());
  EXPECT_EQ(g.page_bytes(), 2u * 2 * 3 * 32 * (2 * 34)) << "layers x k,v x heads x tokens x 2 blocks";
  g = Geometry(KvDtype::kF16);
  g.n_layers = g.n_kv_heads = g.head_dim = 1 << 16;  // 2^50 bytes a page
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateGeometry(g)));
}

TEST(PageCodecQ8_0Test, AFullPageIsFormat3AndItsPayloadIsThePoolPageAsItIs) {
  const KvGeometry g = Geometry(KvDtype::kQ8_0);
  const std::vector<uint8_t> page = PatternPage(g, 21);
  const std::string full = EncodePage(g, page.data(), g.page_tokens);
  EXPECT_EQ(static_cast<uint8_t>(full[4]), kPageFormatVersionQ8_0Blocks);
  EXPECT_EQ(0, std::memcmp(full.data() + kPageHeaderBytes, page.data(), page.size()));
  const std::string partial = EncodePage(g, page.data(), g.page_tokens - 1);
  EXPECT_EQ(static_cast<uint8_t>(partial[4]), kPageFormatVersion);
  // Other types write format 1 whole or partial.
  const KvGeometry f16 = Geometry(KvDtype::kF16);
  EXPECT_EQ(static_cast<uint8_t>(EncodePage(f16, PatternPage(f16, 1).data(), f16.page_tokens)[4]), kPageFormatVersion);
}

TEST(PageCodecQ8_0Test, APartialPageIsEveryBlocksSlotsAsRows) {
  const KvGeometry g = Geometry(KvDtype::kQ8_0);
  const std::vector<uint8_t> page = PatternPage(g, 24);
  const int n = g.page_tokens - 3;
  const std::string partial = EncodePage(g, page.data(), n);
  const size_t row_bytes = g.row_bytes(), block_payload = static_cast<size_t>(n) * row_bytes;
  size_t at = kPageHeaderBytes;  // payload blocks in page order, each its n rows
  for (int layer = 0; layer < g.n_layers; ++layer) {
    for (KvPart part : {KvPart::kKey, KvPart::kValue}) {
      for (int head = 0; head < g.n_kv_heads; ++head, at += block_payload) {
        for (int slot = 0; slot < n; ++slot) {
          const std::vector<uint8_t> row = SlotRow(g, part, page.data() + g.block_offset(layer, part, head), slot);
          ASSERT_EQ(0, std::memcmp(partial.data() + at + slot * row_bytes, row.data(), row_bytes))
              << "layer " << layer << " part " << static_cast<int>(part) << " head " << head << " slot " << slot;
        }
      }
    }
  }
  EXPECT_EQ(at, partial.size());
}

TEST(PageCodecQ8_0Test, FullPagesOfFormats1And2StillReadInThePoolsLayout) {
  const KvGeometry g = Geometry(KvDtype::kQ8_0);
  const std::vector<uint8_t> page = PatternPage(g, 22);
  for (uint32_t version : {kPageFormatVersion, kPageFormatVersionPackedKeys}) {
    SCOPED_TRACE(version);
    const std::vector<uint8_t> older = AsOlderFormat(g, page, version);
    ASSERT_NE(older, page);  // the blocks' order differs
    const std::string old = HandMadeEncoding(g, version, g.page_tokens, older);
    std::vector<uint8_t> decoded(g.page_bytes(), 0), into(g.page_bytes(), 0);
    int n = 0;
    ASSERT_TRUE(DecodePage(g, old, decoded.data(), &n).ok());
    EXPECT_EQ(decoded, page);
    ASSERT_TRUE(DecodePageInto(g, old, into.data(), &n).ok());
    EXPECT_EQ(into, page);
    // Read straight into the pool page, then converted in place.
    std::vector<uint8_t> direct = older;
    absl::StatusOr<EncodedPageInfo> info =
        CheckSplitPage(g, std::string_view(old).substr(0, kPageHeaderBytes), direct.data(), direct.size());
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->version, version);
    FullPageToPoolLayout(g, info->version, direct.data());
    EXPECT_EQ(direct, page);
  }
  // A format-3 page is left as it is.
  std::vector<uint8_t> current = page;
  FullPageToPoolLayout(g, kPageFormatVersionQ8_0Blocks, current.data());
  EXPECT_EQ(current, page);
}

TEST(PageCodecQ8_0Test, Formats2And3ForAnythingButAFullQ8_0PageAreDataLoss) {
  const KvGeometry g = Geometry(KvDtype::kQ8_0);
  const std::vector<uint8_t> page = PatternPage(g, 23);
  std::vector<uint8_t> out(g.page_bytes());
  int n = 0;
  const std::vector<uint8_t> partial(page.begin(), page.begin() + PagePayloadBytes(g, 3));
  const KvGeometry f16 = Geometry(KvDtype::kF16);
  const std::vector<uint8_t> f16_page = PatternPage(f16, 1);
  for (uint32_t version : {kPageFormatVersionPackedKeys, kPageFormatVersionQ8_0Blocks}) {
    const absl::Status s = DecodePage(g, HandMadeEncoding(g, version, 3, partial), out.data(), &n);
    EXPECT_TRUE(absl::IsDataLoss(s)) << s;
    EXPECT_NE(s.message().find(absl::StrCat("version ", version)), std::string::npos) << s;
    EXPECT_TRUE(absl::IsDataLoss(
        DecodePage(f16, HandMadeEncoding(f16, version, f16.page_tokens, f16_page), out.data(), &n)));
  }
  const absl::Status four = DecodePage(g, HandMadeEncoding(g, 4, g.page_tokens, page), out.data(), &n);
  EXPECT_TRUE(absl::IsDataLoss(four)) << four;
  EXPECT_NE(four.message().find("version 4 is not supported"), std::string::npos) << four;
}

}  // namespace
}  // namespace kvs
