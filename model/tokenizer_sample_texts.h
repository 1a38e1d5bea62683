// Texts the tokenizer's work tests (model/tokenizer_test.cc,
// model/pretokenizer_work_test.cc) and its benchmark
// (bench/tokenizer_bench.cc) encode: ordinary mixed text, one very long
// word, and runs of one character class that end in what no run of a
// pre-tokenizer pattern takes (the inputs that made published patterns
// backtrack). Pure functions; header-only.
#ifndef KVSESSION_MODEL_TOKENIZER_SAMPLE_TEXTS_H_
#define KVSESSION_MODEL_TOKENIZER_SAMPLE_TEXTS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kvs::sample_texts {

// `paragraphs` paragraphs (155 bytes each) of mixed text: Latin with
// accents, digits, CJK, an emoji, runs of spaces, a tab, blank lines.
inline std::string MixedProse(int paragraphs) {
  std::string text;
  for (int i = 0; i < paragraphs; ++i) {
    absl::StrAppend(&text, "Paragraph ", i,
                    ": The quick brown fox jumps over the lazy dog; caf\xC3\xA9 na\xC3\xAFve "
                    "r\xC3\xA9sum\xC3\xA9, 12345 + 678 = 13023. \xE6\x88\x91\xE6\x83\xB3 "
                    "\xF0\x9F\xA6\x99 It's    spaced\tout\n\n");
  }
  return text;
}

// One word of `letters` letters (a..z in steps of 7), far longer than any
// vocabulary token.
inline std::string LongWord(int letters) {
  std::string word;
  for (int i = 0; i < letters; ++i) word += static_cast<char>('a' + (i * 7) % 26);
  return word;
}

// A run of `unit` then `tail`, at any length.
struct RunInput {
  std::string name;
  std::string unit;
  std::string tail;

  // `unit` repeated to at least `bytes` bytes, then `tail`.
  std::string Build(size_t bytes) const {
    std::string text;
    text.reserve(bytes + tail.size() + unit.size());
    while (text.size() < bytes) text += unit;
    return text + tail;
  }
};

// Runs of whitespace ending in what no whitespace pattern takes:
// DeepSeek-LLM's published `\s+$` scanned such a run to its end from
// every start inside it (20,000 spaces then "1" took seconds), and the
// `\s+(?!\S)` alternatives backtrack over it.
inline std::vector<RunInput> WhitespaceRuns() {
  return {
      {"spaces then a digit", " ", "1"},
      {"spaces then a euro sign", " ", "\xE2\x82\xAC"},
      {"spaces then an emoji", " ", "\xF0\x9F\x98\x80"},
      {"spaces then a CJK character", " ", "\xE4\xB8\xAD"},
      {"spaces alone", " ", ""},
      {"spaces and tabs then a digit", " \t", "1"},
      {"newlines then a digit", "\n", "1"},
  };
}

// Those, and runs of other classes (line breaks, letters, digits,
// punctuation, apostrophes, ideographic spaces) with the same kind of end.
inline std::vector<RunInput> HostileRuns() {
  std::vector<RunInput> runs = WhitespaceRuns();
  runs.insert(runs.end(), {
                              {"CR LF pairs then a letter", "\r\n", "x"},
                              {"spaces before newlines", "  \n", "1"},
                              {"letters then punctuation", "a", "!"},
                              {"digits then a letter", "7", "x"},
                              {"punctuation then a letter", "!", "x"},
                              {"apostrophes then a letter", "'", "s"},
                              {"space-letter pairs", " a", "1"},
                              {"ideographic spaces then a digit", "\xE3\x80\x80", "1"},
                          });
  return runs;
}

}  // namespace kvs::sample_texts

#endif  // KVSESSION_MODEL_TOKENIZER_SAMPLE_TEXTS_H_
