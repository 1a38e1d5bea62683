// Tests for model/unicode_classes.h: the pattern rewrite PCRE2 runs and NFC.
#include "model/unicode_classes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/pretokenizer.h"

namespace kvs {
namespace {

std::vector<std::string> Pieces(PreTokenizerKind kind, const std::string& text) {
  absl::StatusOr<PreTokenizer> pre = PreTokenizer::Create(kind);
  EXPECT_TRUE(pre.ok()) << pre.status();
  std::vector<std::string> pieces;
  if (!pre.ok()) return pieces;
  for (std::string_view piece : pre->Split(text)) pieces.emplace_back(piece);
  return pieces;
}

TEST(UnicodeClasses, OtherEscapesAndLiteralsAreCopiedUnchanged) {
  EXPECT_EQ(RewriteUnicodeClasses(R"('[sS]|[\r\n]+|\x{4E00}|a\]b)"), R"('[sS]|[\r\n]+|\x{4E00}|a\]b)");
}

TEST(UnicodeClasses, MongolianVowelSeparatorIsNotWhiteSpace) {
  // U+180E is a format character (Cf) since Unicode 6.3: it belongs to the
  // word after it, not to the whitespace before it.
  EXPECT_EQ(Pieces(PreTokenizerKind::kGpt2, "a \xE1\xA0\x8E" "b"),
            (std::vector<std::string>{"a", " \xE1\xA0\x8E", "b"}));
  EXPECT_EQ(Pieces(PreTokenizerKind::kGpt2, "a \xE3\x80\x80" "b"),  // U+3000 is whitespace
            (std::vector<std::string>{"a", " ", "\xE3\x80\x80", "b"}));
}

TEST(UnicodeClasses, Unicode15LettersAndDigitsAreClassified) {
  // U+11F53 KAWI DIGIT THREE: one digit piece of its own under Qwen2's rule.
  EXPECT_EQ(Pieces(PreTokenizerKind::kQwen2, "\xF0\x91\xBD\x93.Q"),
            (std::vector<std::string>{"\xF0\x91\xBD\x93", ".Q"}));
  // U+1E041 (Cyrillic Extended-D, a modifier letter) is a letter run.
  EXPECT_EQ(Pieces(PreTokenizerKind::kLlama3, "\xF0\x9E\x81\x81<b"),
            (std::vector<std::string>{"\xF0\x9E\x81\x81", "<b"}));
}

TEST(UnicodeClasses, NfcComposesAndLeavesOtherTextAlone) {
  EXPECT_EQ(NormalizeNfc("e\xCC\x81"), "\xC3\xA9");              // e + U+0301 -> é
  EXPECT_EQ(NormalizeNfc("\xE2\x84\xA6"), "\xCE\xA9");           // OHM SIGN -> Ω
  EXPECT_EQ(NormalizeNfc("\xE1\x84\x80\xE1\x85\xA1"), "\xEA\xB0\x80");  // jamo -> 가
  EXPECT_EQ(NormalizeNfc("plain ascii"), "plain ascii");
  EXPECT_EQ(NormalizeNfc("bad \xFF utf-8 e\xCC\x81"), "bad \xFF utf-8 e\xCC\x81");
}

}  // namespace
}  // namespace kvs
