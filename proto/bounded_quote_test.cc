// Quote() against inputs a hostile client, a damaged record or a crafted
// model file could carry.
#include "proto/bounded_quote.h"

#include <string>

#include "gtest/gtest.h"

namespace kvs {
namespace {

TEST(BoundedQuote, AShortInputIsQuotedWhole) {
  EXPECT_EQ(Quote("ses_0123"), "'ses_0123'");
  EXPECT_EQ(Quote(""), "''");
}

TEST(BoundedQuote, BytesThatAreNotPrintableAreEscaped) {
  EXPECT_EQ(Quote(std::string("a\xff\n\0", 4)), "'a\\xff\\n\\x00'");
}

TEST(BoundedQuote, ALongInputIsCutToItsPrefixAndNamesItsSize) {
  const std::string huge(100000, 'x');
  EXPECT_EQ(Quote(huge, 4), "'xxxx...' (100000 bytes)");
  EXPECT_EQ(Quote(huge), "'" + std::string(kDefaultQuoteBytes, 'x') + "...' (100000 bytes)");
}

TEST(BoundedQuote, AnInputOfExactlyTheLimitIsNotCut) {
  EXPECT_EQ(Quote("abcd", 4), "'abcd'");
  EXPECT_EQ(Quote("abcde", 4), "'abcd...' (5 bytes)");
}

TEST(BoundedQuote, TheQuoteIsBoundedWhateverTheBytes) {
  // Every byte escaped takes four characters (\xff): the worst case.
  const std::string binary(1 << 20, '\xff');
  EXPECT_LE(Quote(binary).size(), 4 * kDefaultQuoteBytes + 32);
  EXPECT_LE(Quote(binary, 200).size(), 4 * 200u + 32);
}

}  // namespace
}  // namespace kvs
