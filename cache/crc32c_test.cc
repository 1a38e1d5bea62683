// CRC-32C: known vectors, extension, and the hardware paths (the CRC
// instruction, the carry-less fold) against the table-driven one.
#include "cache/crc32c.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace kvs {
namespace {

struct Vector {
  std::vector<uint8_t> data;
  uint32_t crc;
};

// RFC 3720 (iSCSI) appendix B.4 and the usual check value.
std::vector<Vector> KnownVectors() {
  std::vector<Vector> v;
  const std::string check = "123456789";
  v.push_back({std::vector<uint8_t>(check.begin(), check.end()), 0xE3069283u});
  v.push_back({std::vector<uint8_t>(32, 0x00), 0x8A9136AAu});
  v.push_back({std::vector<uint8_t>(32, 0xFF), 0x62A8AB43u});
  std::vector<uint8_t> ascending(32), descending(32);
  for (int i = 0; i < 32; ++i) {
    ascending[i] = static_cast<uint8_t>(i);
    descending[i] = static_cast<uint8_t>(31 - i);
  }
  v.push_back({ascending, 0x46DD794Eu});
  v.push_back({descending, 0x113FDB5Cu});
  v.push_back({{}, 0u});
  return v;
}

TEST(Crc32cTest, KnownVectors) {
  for (const Vector& v : KnownVectors()) {
    EXPECT_EQ(Crc32c(v.data.data(), v.data.size()), v.crc);
    EXPECT_EQ(crc32c_internal::Portable(v.data.data(), v.data.size(), 0), v.crc);
  }
}

TEST(Crc32cTest, InitExtendsAChecksum) {
  const std::string s = "the quick brown fox jumps over the lazy dog, twice over";
  const uint32_t whole = Crc32c(s.data(), s.size());
  for (size_t split = 0; split <= s.size(); ++split) {
    const uint32_t head = Crc32c(s.data(), split);
    EXPECT_EQ(Crc32c(s.data() + split, s.size() - split, head), whole) << split;
  }
}

TEST(Crc32cTest, DetectsEverySingleBitFlip) {
  std::vector<uint8_t> data(64);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
  const uint32_t crc = Crc32c(data.data(), data.size());
  for (size_t bit = 0; bit < data.size() * 8; ++bit) {
    data[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    EXPECT_NE(Crc32c(data.data(), data.size()), crc) << bit;
    data[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  }
}

TEST(Crc32cTest, HardwareMatchesPortableOnRandomData) {
  if (!crc32c_internal::HaveSse42()) GTEST_SKIP() << "no SSE4.2 on this CPU";
  std::mt19937 rng(42);
  std::vector<uint8_t> buffer(4096 + 16);
  for (uint8_t& b : buffer) b = static_cast<uint8_t>(rng());
  // Every alignment and tail length, and a few long runs.
  for (size_t offset = 0; offset < 16; ++offset) {
    for (size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4096}) {
      const uint32_t init = static_cast<uint32_t>(rng());
      EXPECT_EQ(crc32c_internal::Sse42(buffer.data() + offset, n, init),
                crc32c_internal::Portable(buffer.data() + offset, n, init))
          << "offset " << offset << " n " << n;
    }
  }
}


TEST(Crc32cTest, InterleavedHardwarePathMatchesPortableOnLongInputs) {
  if (!crc32c_internal::HaveSse42()) GTEST_SKIP() << "no SSE4.2 on this CPU";
  constexpr size_t kTriple = 3 * crc32c_internal::kInterleaveBlock;
  std::mt19937 rng(7);
  std::vector<uint8_t> buffer(5 * kTriple + 64);
  for (uint8_t& b : buffer) b = static_cast<uint8_t>(rng());
  // Lengths around the interleaved block boundaries, then random ones.
  std::vector<size_t> lengths = {kTriple - 1, kTriple, kTriple + 1, kTriple + 8,
                                 2 * kTriple - 1, 2 * kTriple, 2 * kTriple + 13, 5 * kTriple};
  for (int i = 0; i < 40; ++i) lengths.push_back(rng() % (5 * kTriple));
  for (size_t n : lengths) {
    const size_t offset = rng() % 64;
    const uint32_t init = static_cast<uint32_t>(rng());
    EXPECT_EQ(crc32c_internal::Sse42(buffer.data() + offset, n, init),
              crc32c_internal::Portable(buffer.data() + offset, n, init))
        << "offset " << offset << " n " << n;
  }
}

// The carry-less folds this CPU can run, by name.
std::vector<std::pair<const char*, uint32_t (*)(const void*, size_t, uint32_t)>> Folds() {
  std::vector<std::pair<const char*, uint32_t (*)(const void*, size_t, uint32_t)>> folds;
  if (crc32c_internal::HaveAvx2Clmul()) folds.emplace_back("avx2", crc32c_internal::Avx2Clmul);
  if (crc32c_internal::HaveAvx512Clmul()) folds.emplace_back("avx512", crc32c_internal::Avx512Clmul);
  return folds;
}

TEST(Crc32cTest, CarrylessFoldsMatchPortableAtEveryLengthAroundTheirSteps) {
  if (Folds().empty()) GTEST_SKIP() << "no VPCLMULQDQ on this CPU";
  std::mt19937 rng(5);
  std::vector<uint8_t> buffer(8 * 4096 + 64);
  for (uint8_t& b : buffer) b = static_cast<uint8_t>(rng());
  for (const auto& [name, fold] : Folds()) {
    // Every length up to eight 512-byte steps (below kClmulMinBytes the
    // SSE4.2 path answers; from it the fold, then every tail length), at
    // several alignments and initial registers.
    for (size_t n = 0; n <= 8 * 512 + 17; ++n) {
      const size_t offset = n % 61;
      const uint32_t init = n % 3 == 0 ? 0 : static_cast<uint32_t>(rng());
      ASSERT_EQ(fold(buffer.data() + offset, n, init), crc32c_internal::Portable(buffer.data() + offset, n, init))
          << name << " offset " << offset << " n " << n;
    }
    // A whole buffer, and random long lengths.
    std::vector<size_t> lengths = {8 * 4096, 8 * 4096 - 1};
    for (int i = 0; i < 40; ++i) lengths.push_back(rng() % (8 * 4096));
    for (size_t n : lengths) {
      const size_t offset = rng() % 64;
      const uint32_t init = static_cast<uint32_t>(rng());
      EXPECT_EQ(fold(buffer.data() + offset, n, init), crc32c_internal::Portable(buffer.data() + offset, n, init))
          << name << " offset " << offset << " n " << n;
    }
  }
}

TEST(Crc32cTest, CarrylessFoldsDetectEverySingleBitFlipOfAFoldedInput) {
  if (Folds().empty()) GTEST_SKIP() << "no VPCLMULQDQ on this CPU";
  std::vector<uint8_t> data(1024 + 40);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 13 + 5);
  for (const auto& [name, fold] : Folds()) {
    const uint32_t crc = fold(data.data(), data.size(), 0);
    for (size_t bit = 0; bit < data.size() * 8; ++bit) {
      data[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      ASSERT_NE(fold(data.data(), data.size(), 0), crc) << name << " bit " << bit;
      data[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    }
  }
}

TEST(Crc32cTest, LongInputsExtendLikeShortOnes) {
  // A 1.8 MB page checked at once equals the same bytes checked in pieces.
  std::mt19937 rng(11);
  std::vector<uint8_t> page(1835008 + 48);
  for (uint8_t& b : page) b = static_cast<uint8_t>(rng());
  const uint32_t whole = Crc32c(page.data(), page.size());
  uint32_t pieces = 0;
  for (size_t at = 0; at < page.size();) {
    const size_t n = std::min<size_t>(page.size() - at, 1 + rng() % 70000);
    pieces = Crc32c(page.data() + at, n, pieces);
    at += n;
  }
  EXPECT_EQ(pieces, whole);
  EXPECT_EQ(crc32c_internal::Portable(page.data(), page.size(), 0), whole);
}

}  // namespace
}  // namespace kvs
