// Tests for the tokenizer module: llama.cpp's tokenizer test vectors for
// every vocabulary in ../shared/vocab, the prompt ids of the reference runs
// in ../shared/reference, round trips, the pre-tokenizer regexes, UTF-8
// validation and streaming, special tokens, and error handling on small
// hand-made GGUFs. Tests that need ../shared skip when it is absent.
#include "model/tokenizer.h"

#include <gtest/gtest.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/bpe_tokenizer.h"
#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/pretokenizer.h"
#include "model/spm_tokenizer.h"
#include "model/tokenizer_sample_texts.h"
#include "model/utf8.h"
#include "tests/scratch_dir.h"

namespace kvs {
namespace {

namespace fs = std::filesystem;

const fs::path kSharedDir = KVS_SHARED_DIR;

// Skips the test when ../shared (or the part of it the test reads) is absent.
#define SKIP_WITHOUT_SHARED(subdir)                                                \
  if (!fs::is_directory(kSharedDir / (subdir))) {                                  \
    GTEST_SKIP() << "shared data not found: " << (kSharedDir / (subdir))           \
                 << " (tests read models/, reference/ and vocab/ from ../shared)"; \
  }

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Printable form of a test string for failure messages.
std::string Escaped(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '"':
        out += "\\\"";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

// The non-empty fields of `s` between `separator`s. (Debian's Abseil has
// its own string_view, so absl::StrSplit does not take std::string_view.)
std::vector<std::string_view> SplitFields(std::string_view s, char separator) {
  std::vector<std::string_view> fields;
  for (size_t pos = 0; pos <= s.size();) {
    size_t end = s.find(separator, pos);
    if (end == std::string_view::npos) end = s.size();
    if (end > pos) fields.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return fields;
}

std::string Concatenated(const std::vector<std::string_view>& pieces) {
  std::string text;
  for (std::string_view piece : pieces) text.append(piece);
  return text;
}

std::string IdsToString(const std::vector<int32_t>& ids) { return absl::StrJoin(ids, " "); }

struct LoadedTokenizer {
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Tokenizer> tokenizer;
};

LoadedTokenizer Load(const fs::path& path) {
  LoadedTokenizer loaded;
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(path.string());
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  if (!gguf.ok()) return loaded;
  loaded.gguf = *std::move(gguf);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf(*loaded.gguf);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  if (tokenizer.ok()) loaded.tokenizer = *std::move(tokenizer);
  return loaded;
}

// ---------------------------------------------------------------------------
// llama.cpp's tokenizer test vectors (../shared/vocab/ggml-vocab-*.gguf).

struct VocabVector {
  std::string text;
  std::vector<int32_t> ids;
};

// `.inp` holds the strings, each followed by the separator line; line N of
// `.out` holds the ids of string N.
std::vector<VocabVector> ReadVocabVectors(const fs::path& gguf_path) {
  const std::string inputs = ReadFile(gguf_path.string() + ".inp");
  const std::string outputs = ReadFile(gguf_path.string() + ".out");
  constexpr std::string_view kSeparator = "\n__ggml_vocab_test__\n";
  std::vector<VocabVector> vectors;
  for (size_t pos = 0;;) {
    const size_t end = inputs.find(kSeparator, pos);
    if (end == std::string::npos) break;
    vectors.push_back({inputs.substr(pos, end - pos), {}});
    pos = end + kSeparator.size();
  }
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos < outputs.size();) {
    size_t end = outputs.find('\n', pos);
    if (end == std::string::npos) end = outputs.size();
    lines.push_back(std::string_view(outputs).substr(pos, end - pos));
    pos = end + 1;
  }
  EXPECT_GE(lines.size(), vectors.size()) << gguf_path;
  for (size_t i = 0; i < vectors.size() && i < lines.size(); ++i) {
    for (std::string_view id : SplitFields(lines[i], ' ')) {
      vectors[i].ids.push_back(std::stoi(std::string(id)));
    }
  }
  return vectors;
}

fs::path VocabPath(std::string_view name) {
  return kSharedDir / "vocab" / absl::StrCat("ggml-vocab-", std::string(name), ".gguf");
}

class VocabVectorTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabVectorTest, MatchesLlamaCpp) {
  SKIP_WITHOUT_SHARED("vocab");
  const fs::path path = VocabPath(GetParam());
  LoadedTokenizer loaded = Load(path);
  ASSERT_NE(loaded.tokenizer, nullptr);
  const std::vector<VocabVector> vectors = ReadVocabVectors(path);
  ASSERT_FALSE(vectors.empty());
  int passed = 0;
  for (const VocabVector& vector : vectors) {
    const std::vector<int32_t> ids =
        loaded.tokenizer->Encode(vector.text, /*add_special=*/false, /*parse_special=*/false);
    if (ids == vector.ids) {
      ++passed;
    } else {
      ADD_FAILURE() << GetParam() << ": " << Escaped(vector.text)
                    << "\n  expected: " << IdsToString(vector.ids)
                    << "\n  got:      " << IdsToString(ids);
    }
  }
  std::cout << "[ vectors  ] " << GetParam() << ": " << passed << "/" << vectors.size()
            << " pass\n";
}

// Decoding the tokens of every test string gives the string back: exactly
// for byte-level BPE, after the added leading space for SentencePiece.
TEST_P(VocabVectorTest, RoundTrips) {
  SKIP_WITHOUT_SHARED("vocab");
  const fs::path path = VocabPath(GetParam());
  LoadedTokenizer loaded = Load(path);
  ASSERT_NE(loaded.tokenizer, nullptr);
  const bool spm = loaded.tokenizer->model_name() == "llama";
  for (const VocabVector& vector : ReadVocabVectors(path)) {
    const std::string decoded =
        loaded.tokenizer->Decode(loaded.tokenizer->Encode(vector.text, false));
    const std::string expected = spm && !vector.text.empty() ? " " + vector.text : vector.text;
    EXPECT_EQ(decoded, expected) << GetParam() << ": " << Escaped(vector.text);
  }
}

const std::string kVocabularies[] = {"llama-spm", "phi-3",     "gpt-2", "deepseek-llm",
                                     "falcon",    "starcoder", "llama3", "qwen3"};

INSTANTIATE_TEST_SUITE_P(SharedVocab, VocabVectorTest, ::testing::ValuesIn(kVocabularies),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

// Every vocabulary GGUF shipped in ../shared/vocab is covered above.
TEST(VocabVectors, EveryVocabularyIsTested) {
  SKIP_WITHOUT_SHARED("vocab");
  for (const fs::directory_entry& entry : fs::directory_iterator(kSharedDir / "vocab")) {
    if (entry.path().extension() != ".gguf") continue;
    const std::string stem = entry.path().stem().string();  // ggml-vocab-NAME
    const std::string name = stem.substr(std::string("ggml-vocab-").size());
    EXPECT_NE(std::find(std::begin(kVocabularies), std::end(kVocabularies), name),
              std::end(kVocabularies))
        << "add " << name << " to kVocabularies";
  }
}

TEST(VocabVectors, FamiliesAndDefaults) {
  SKIP_WITHOUT_SHARED("vocab");
  LoadedTokenizer spm = Load(VocabPath("llama-spm"));
  ASSERT_NE(spm.tokenizer, nullptr);
  EXPECT_EQ(spm.tokenizer->model_name(), "llama");
  EXPECT_EQ(spm.tokenizer->vocab_size(), 32000);
  EXPECT_EQ(spm.tokenizer->bos_id(), 1);
  EXPECT_EQ(spm.tokenizer->eos_id(), 2);
  EXPECT_TRUE(spm.tokenizer->add_bos());
  EXPECT_FALSE(spm.tokenizer->add_eos());
  EXPECT_EQ(spm.tokenizer->Encode("Hello", true), (std::vector<int32_t>{1, 15043}));
  EXPECT_EQ(spm.tokenizer->Encode("", true), (std::vector<int32_t>{1}));
  EXPECT_TRUE(spm.tokenizer->Encode("", false).empty());
  EXPECT_TRUE(spm.tokenizer->IsEndOfGeneration(2));
  EXPECT_FALSE(spm.tokenizer->IsEndOfGeneration(1));

  LoadedTokenizer gpt2 = Load(VocabPath("gpt-2"));
  ASSERT_NE(gpt2.tokenizer, nullptr);
  EXPECT_EQ(gpt2.tokenizer->model_name(), "gpt2");
  EXPECT_FALSE(gpt2.tokenizer->add_bos());
  EXPECT_EQ(gpt2.tokenizer->Encode("Hello world", true),
            gpt2.tokenizer->Encode("Hello world", false));
  EXPECT_EQ(gpt2.tokenizer->end_of_generation_ids(), (std::vector<int32_t>{50256}));
  EXPECT_EQ(gpt2.tokenizer->Piece(50256), "");  // <|endoftext|> is a control token
}

// ---------------------------------------------------------------------------
// Prompt ids of the reference runs (../shared/reference/*.jsonl).

// Appends the UTF-8 of a JSON \uXXXX escape (with its low surrogate, if it
// is a high one) starting at json[*pos] (just after "\u"); advances *pos.
bool AppendJsonUnicodeEscape(std::string_view json, size_t* pos, std::string* out) {
  const auto read_hex4 = [&](size_t at, char32_t* value) {
    if (at + 4 > json.size()) return false;
    *value = 0;
    for (size_t i = at; i < at + 4; ++i) {
      const char c = json[i];
      const int digit = c >= '0' && c <= '9'   ? c - '0'
                        : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                               : -1;
      if (digit < 0) return false;
      *value = *value * 16 + digit;
    }
    return true;
  };
  char32_t cp;
  if (!read_hex4(*pos, &cp)) return false;
  *pos += 4;
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    char32_t low;
    if (json.substr(*pos, 2) != "\\u" || !read_hex4(*pos + 2, &low) || low < 0xDC00 ||
        low > 0xDFFF) {
      return false;
    }
    *pos += 6;
    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
  }
  utf8::AppendCodePoint(cp, out);
  return true;
}

// The decoded JSON string value of `"key": "..."` in a one-line object.
std::optional<std::string> JsonStringField(std::string_view json, std::string_view key) {
  const std::string prefix = absl::StrCat("\"", std::string(key), "\": \"");
  size_t pos = json.find(prefix);
  if (pos == std::string_view::npos) return std::nullopt;
  pos += prefix.size();
  std::string value;
  while (pos < json.size() && json[pos] != '"') {
    if (json[pos] != '\\') {
      value += json[pos++];
      continue;
    }
    if (++pos >= json.size()) return std::nullopt;
    const char escape = json[pos++];
    switch (escape) {
      case 'n':
        value += '\n';
        break;
      case 't':
        value += '\t';
        break;
      case 'r':
        value += '\r';
        break;
      case 'b':
        value += '\b';
        break;
      case 'f':
        value += '\f';
        break;
      case 'u':
        if (!AppendJsonUnicodeEscape(json, &pos, &value)) return std::nullopt;
        break;
      default:
        value += escape;  // \" \\ \/
    }
  }
  if (pos >= json.size()) return std::nullopt;
  return value;
}

// The integers of `"key": [...]`.
std::optional<std::vector<int32_t>> JsonIntArrayField(std::string_view json, std::string_view key) {
  const std::string prefix = absl::StrCat("\"", std::string(key), "\": [");
  size_t pos = json.find(prefix);
  if (pos == std::string_view::npos) return std::nullopt;
  pos += prefix.size();
  const size_t end = json.find(']', pos);
  if (end == std::string_view::npos) return std::nullopt;
  std::vector<int32_t> values;
  for (std::string_view item : SplitFields(json.substr(pos, end - pos), ',')) {
    values.push_back(std::stoi(std::string(item)));
  }
  return values;
}

// "tiny-llama-gqa.exact.jsonl" -> "tiny-llama-gqa".
std::string ModelNameOfReference(const std::string& file_name) {
  for (std::string_view suffix : {".exact.jsonl", ".native.jsonl", ".jsonl"}) {
    if (file_name.size() > suffix.size() &&
        file_name.compare(file_name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return file_name.substr(0, file_name.size() - suffix.size());
    }
  }
  return file_name;
}

TEST(ReferencePrompts, EncodeMatchesLlamaCppPromptIds) {
  SKIP_WITHOUT_SHARED("reference");
  SKIP_WITHOUT_SHARED("models");
  std::map<std::string, std::vector<fs::path>> references_by_model;
  for (const fs::directory_entry& entry : fs::directory_iterator(kSharedDir / "reference")) {
    if (entry.path().extension() != ".jsonl") continue;
    references_by_model[ModelNameOfReference(entry.path().filename().string())].push_back(
        entry.path());
  }
  ASSERT_FALSE(references_by_model.empty());
  for (const auto& [model, references] : references_by_model) {
    LoadedTokenizer loaded = Load(kSharedDir / "models" / (model + ".gguf"));
    ASSERT_NE(loaded.tokenizer, nullptr) << model;
    for (const fs::path& reference : references) {
      std::istringstream lines(ReadFile(reference));
      int checked = 0;
      int passed = 0;
      for (std::string line; std::getline(lines, line);) {
        if (line.empty()) continue;
        const std::optional<std::string> prompt = JsonStringField(line, "prompt");
        const std::optional<std::vector<int32_t>> prompt_ids =
            JsonIntArrayField(line, "prompt_ids");
        ASSERT_TRUE(prompt.has_value() && prompt_ids.has_value())
            << reference << ": cannot parse line " << checked + 1;
        ++checked;
        const std::vector<int32_t> ids = loaded.tokenizer->Encode(*prompt, /*add_special=*/true);
        if (ids == *prompt_ids) {
          ++passed;
        } else {
          ADD_FAILURE() << reference.filename() << " line " << checked << ": " << Escaped(*prompt)
                        << "\n  expected: " << IdsToString(*prompt_ids)
                        << "\n  got:      " << IdsToString(ids);
        }
      }
      EXPECT_GT(checked, 0) << reference;
      std::cout << "[ prompts  ] " << reference.filename().string() << ": " << passed << "/"
                << checked << " pass\n";
    }
  }
}

// ---------------------------------------------------------------------------
// Special tokens.

TEST(SpecialTokens, ParsedOnlyWhenAsked) {
  SKIP_WITHOUT_SHARED("vocab");
  LoadedTokenizer gpt2 = Load(VocabPath("gpt-2"));
  ASSERT_NE(gpt2.tokenizer, nullptr);
  const std::string text = "Hi<|endoftext|>there";
  const std::vector<int32_t> parsed = gpt2.tokenizer->Encode(text, false, /*parse_special=*/true);
  EXPECT_EQ(std::count(parsed.begin(), parsed.end(), 50256), 1) << IdsToString(parsed);
  const std::vector<int32_t> plain = gpt2.tokenizer->Encode(text, false, /*parse_special=*/false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 50256), 0) << IdsToString(plain);
  EXPECT_EQ(gpt2.tokenizer->Decode(plain), text);
}

TEST(SpecialTokens, SpmPrefixesTextAfterSpecialTokenWithSpace) {
  SKIP_WITHOUT_SHARED("vocab");
  LoadedTokenizer spm = Load(VocabPath("llama-spm"));
  ASSERT_NE(spm.tokenizer, nullptr);
  // "<s>Hello": the text after the parsed <s> gets the leading space too.
  EXPECT_EQ(spm.tokenizer->Encode("<s>Hello", false, /*parse_special=*/true),
            (std::vector<int32_t>{1, 15043}));
}

// Phi-3 vocabularies: special tokens swallow the whitespace after them, and
// the user-defined "</s>" is split out even without parse_special.
TEST(SpecialTokens, Phi3StripsWhitespaceAfterSpecialTokens) {
  SKIP_WITHOUT_SHARED("vocab");
  LoadedTokenizer phi3 = Load(VocabPath("phi-3"));
  ASSERT_NE(phi3.tokenizer, nullptr);
  const std::vector<int32_t> ids = phi3.tokenizer->Encode("<|user|>\nHi<|end|>\n", false, true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 32010);
  EXPECT_EQ(ids.back(), 32007);
  EXPECT_EQ(phi3.tokenizer->Decode(ids), " Hi");
  EXPECT_TRUE(phi3.tokenizer->IsEndOfGeneration(32007));  // <|end|>
  EXPECT_TRUE(phi3.tokenizer->IsEndOfGeneration(32000));  // <|endoftext|>, the EOS

  const std::vector<int32_t> plain = phi3.tokenizer->Encode("a</s>b", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 1) << IdsToString(plain);
}

// ---------------------------------------------------------------------------
// Pieces and streaming.

TEST(Pieces, SpmByteTokensStreamAsOneCharacter) {
  SKIP_WITHOUT_SHARED("vocab");
  LoadedTokenizer spm = Load(VocabPath("llama-spm"));
  ASSERT_NE(spm.tokenizer, nullptr);
  const std::string llama = "\xF0\x9F\xA6\x99";  // U+1F999, not in the vocabulary
  const std::vector<int32_t> ids = spm.tokenizer->Encode(llama, false);
  // "▁" then the four byte tokens <0xF0> <0x9F> <0xA6> <0x99>.
  ASSERT_EQ(ids.size(), 5u) << IdsToString(ids);
  for (size_t i = 1; i < ids.size(); ++i) {
    EXPECT_EQ(spm.tokenizer->token_type(ids[i]), TokenType::kByte);
  }
  Utf8StreamDecoder decoder;
  std::string streamed;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string text = decoder.Push(spm.tokenizer->Piece(ids[i]));
    if (i > 0 && i + 1 < ids.size()) {
      EXPECT_EQ(text, "") << "after token " << i;
    }
    streamed += text;
  }
  streamed += decoder.Finish();
  EXPECT_EQ(streamed, " " + llama);
}

TEST(Pieces, SpmPieceRules) {
  SKIP_WITHOUT_SHARED("vocab");
  LoadedTokenizer spm = Load(VocabPath("llama-spm"));
  ASSERT_NE(spm.tokenizer, nullptr);
  const Tokenizer& tokenizer = *spm.tokenizer;
  EXPECT_EQ(tokenizer.Piece(15043), " Hello");      // "▁Hello"
  EXPECT_EQ(tokenizer.Piece(1), "");                // <s>
  EXPECT_EQ(tokenizer.Piece(2), "");                // </s>
  EXPECT_EQ(tokenizer.Piece(0), " \xE2\x81\x87 ");  // <unk>
  EXPECT_EQ(tokenizer.Piece(3 + 0x41), "A");        // <0x41>
  EXPECT_EQ(tokenizer.Piece(-1), "");
  EXPECT_EQ(tokenizer.Piece(tokenizer.vocab_size()), "");
  EXPECT_EQ(tokenizer.token_text(15043), "\xE2\x96\x81Hello");
  EXPECT_EQ(tokenizer.token_type(0), TokenType::kUnknown);
}

TEST(Pieces, BpeMapsSymbolsBackToBytes) {
  SKIP_WITHOUT_SHARED("vocab");
  LoadedTokenizer gpt2 = Load(VocabPath("gpt-2"));
  ASSERT_NE(gpt2.tokenizer, nullptr);
  const std::vector<int32_t> ids = gpt2.tokenizer->Encode(" caf\xC3\xA9\n", false);
  std::string joined;
  for (int32_t id : ids) joined += gpt2.tokenizer->Piece(id);
  EXPECT_EQ(joined, " caf\xC3\xA9\n");
  EXPECT_EQ(gpt2.tokenizer->token_text(gpt2.tokenizer->Encode(" the", false)[0]), "\xC4\xA0the");
}

// ---------------------------------------------------------------------------
// Work and concurrency.

std::string LongPrompt(int paragraphs = 60) { return sample_texts::MixedProse(paragraphs); }
using sample_texts::LongWord;

// The merge lookups (model/tokenizer.h) one Encode of `text` makes.
uint64_t MergeLookupsOfEncoding(const Tokenizer& tokenizer, const std::string& text) {
  const uint64_t before = tokenizer.merge_lookups();
  tokenizer.Encode(text, /*add_special=*/true);
  return tokenizer.merge_lookups() - before;
}

// Merging is linear in the text: four times the text makes about four
// times the lookups (quadratic merging would make about sixteen times).
// Counted, not timed, so it holds on any machine and under sanitizers.
// Both merge loops make at most (n - 1) + 2 x merges lookups by their
// construction (a heap of candidate pairs), so this guards against a
// rewrite (a rescan per merge, say) that keeps the count. Pre-tokenizing
// is shown linear in model/pretokenizer_work_test.cc; NFC, the special-
// token split and the byte mapping are single passes, not counted.
TEST(Work, EncodingFourTimesTheTextMakesAboutFourTimesTheMergeLookups) {
  SKIP_WITHOUT_SHARED("vocab");
  struct Input {
    std::string name;
    std::string short_text;
    std::string long_text;
  };
  std::vector<Input> inputs = {
      {"paragraphs", LongPrompt(15), LongPrompt(60)},
      {"one long word", LongWord(5'000), LongWord(20'000)},
  };
  for (const sample_texts::RunInput& run : sample_texts::WhitespaceRuns()) {
    inputs.push_back({run.name, run.Build(15'000), run.Build(60'000)});
  }
  for (const std::string& name : kVocabularies) {
    LoadedTokenizer loaded = Load(VocabPath(name));
    ASSERT_NE(loaded.tokenizer, nullptr);
    for (const Input& input : inputs) {
      const uint64_t short_lookups = MergeLookupsOfEncoding(*loaded.tokenizer, input.short_text);
      const uint64_t long_lookups = MergeLookupsOfEncoding(*loaded.tokenizer, input.long_text);
      // (Some vocabularies split some inputs into single bytes: nothing to
      // merge, at any length.)
      if (input.name == "paragraphs") {
        ASSERT_GT(short_lookups, 0u) << name;
      }
      EXPECT_LE(static_cast<double>(long_lookups), 4.5 * static_cast<double>(short_lookups))
          << name << ", " << input.name << ": " << short_lookups << " lookups, then "
          << long_lookups;
      EXPECT_GE(static_cast<double>(long_lookups), 3.0 * static_cast<double>(short_lookups))
          << name << ", " << input.name << ": " << short_lookups << " lookups, then "
          << long_lookups;
    }
  }
}

TEST(RoundTrip, ALongWordAndLongMixedTextEncodeToTokensThatDecodeBackToThem) {
  SKIP_WITHOUT_SHARED("vocab");
  const std::string word = LongWord(20'000);
  const std::string prose = LongPrompt();
  for (const std::string& name : kVocabularies) {
    LoadedTokenizer loaded = Load(VocabPath(name));
    ASSERT_NE(loaded.tokenizer, nullptr);
    // SentencePiece vocabularies put a space before the text.
    const std::string prefix = loaded.tokenizer->model_name() == "llama" ? " " : "";
    const std::vector<int32_t> word_ids = loaded.tokenizer->Encode(word, /*add_special=*/false);
    EXPECT_GT(word_ids.size(), 1000u) << name;
    EXPECT_EQ(loaded.tokenizer->Decode(word_ids), prefix + word) << name;
    const std::vector<int32_t> prose_ids = loaded.tokenizer->Encode(prose, /*add_special=*/false);
    EXPECT_GT(prose_ids.size(), 1500u) << name;
    // (NFC leaves this text as it is: its accents are precomposed.)
    EXPECT_EQ(loaded.tokenizer->Decode(prose_ids), prefix + prose) << name;
  }
}

TEST(Concurrency, ConcurrentEncodesAgree) {
  SKIP_WITHOUT_SHARED("vocab");
  const std::string prompt = LongPrompt();
  for (const char* name : {"llama-spm", "gpt-2"}) {
    LoadedTokenizer loaded = Load(VocabPath(name));
    ASSERT_NE(loaded.tokenizer, nullptr);
    const std::vector<int32_t> expected = loaded.tokenizer->Encode(prompt, true, true);
    std::vector<std::vector<int32_t>> results(4);
    std::vector<std::thread> threads;
    for (auto& result : results) {
      threads.emplace_back([&] {
        for (int i = 0; i < 5; ++i) result = loaded.tokenizer->Encode(prompt, true, true);
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (const auto& result : results) EXPECT_EQ(result, expected) << name;
  }
}

// ---------------------------------------------------------------------------
// Pre-tokenizer regexes (no shared data needed).

std::vector<std::string> SplitWith(PreTokenizerKind kind, std::string_view text) {
  absl::StatusOr<PreTokenizer> pre_tokenizer = PreTokenizer::Create(kind);
  EXPECT_TRUE(pre_tokenizer.ok()) << pre_tokenizer.status();
  if (!pre_tokenizer.ok()) return {};
  std::vector<std::string> pieces;
  for (std::string_view piece : pre_tokenizer->Split(text)) pieces.emplace_back(piece);
  return pieces;
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, EveryFamilyCompiles) {
  for (PreTokenizerKind kind :
       {PreTokenizerKind::kDefault, PreTokenizerKind::kGpt2, PreTokenizerKind::kLlama3,
        PreTokenizerKind::kQwen2, PreTokenizerKind::kDeepseekLlm, PreTokenizerKind::kDeepseekCoder,
        PreTokenizerKind::kFalcon, PreTokenizerKind::kStarcoder}) {
    absl::StatusOr<PreTokenizer> pre_tokenizer = PreTokenizer::Create(kind);
    ASSERT_TRUE(pre_tokenizer.ok()) << pre_tokenizer.status();
    const std::string text = "Hello, y'all! 12345 \xE6\x88\x91 \xF0\x9F\xA6\x99  \n x";
    EXPECT_EQ(Concatenated(pre_tokenizer->Split(text)), text);
  }
}

TEST(PreTokenizer, NamesMapToFamilies) {
  EXPECT_EQ(*PreTokenizerKindFromName("qwen2"), PreTokenizerKind::kQwen2);
  EXPECT_EQ(*PreTokenizerKindFromName("llama-bpe"), PreTokenizerKind::kLlama3);
  EXPECT_EQ(*PreTokenizerKindFromName("llama3"), PreTokenizerKind::kLlama3);
  EXPECT_EQ(*PreTokenizerKindFromName("gpt-2"), PreTokenizerKind::kGpt2);
  EXPECT_EQ(*PreTokenizerKindFromName("default"), PreTokenizerKind::kDefault);
  EXPECT_EQ(*PreTokenizerKindFromName(""), PreTokenizerKind::kDefault);
  const absl::StatusOr<PreTokenizerKind> unknown = PreTokenizerKindFromName("klingon");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("klingon"), absl::string_view::npos);
}

TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(SplitWith(PreTokenizerKind::kGpt2, "Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(SplitWith(PreTokenizerKind::kGpt2, "I'll go  now!!"),
            (Pieces{"I", "'ll", " go", " ", " now", "!!"}));
  EXPECT_EQ(SplitWith(PreTokenizerKind::kGpt2, "12345"), (Pieces{"12345"}));
  EXPECT_EQ(SplitWith(PreTokenizerKind::kGpt2, "a\n\nb"), (Pieces{"a", "\n", "\n", "b"}));
}

TEST(PreTokenizer, Qwen2SplitsDigitsOneByOne) {
  EXPECT_EQ(SplitWith(PreTokenizerKind::kQwen2, "12345"), (Pieces{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(SplitWith(PreTokenizerKind::kQwen2, "It's 42 o'clock"),
            (Pieces{"It", "'s", " ", "4", "2", " o", "'clock"}));
  EXPECT_EQ(SplitWith(PreTokenizerKind::kQwen2, "HE'LL"), (Pieces{"HE", "'LL"}));
  EXPECT_EQ(SplitWith(PreTokenizerKind::kQwen2, "a\n\n  b"), (Pieces{"a", "\n\n", " ", " b"}));
}

TEST(PreTokenizer, Llama3GroupsDigitsByThree) {
  EXPECT_EQ(SplitWith(PreTokenizerKind::kLlama3, "12345"), (Pieces{"123", "45"}));
  EXPECT_EQ(SplitWith(PreTokenizerKind::kLlama3, "1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(SplitWith(PreTokenizerKind::kLlama3, "we'll see, it's"),
            (Pieces{"we", "'ll", " see", ",", " it", "'s"}));
  EXPECT_EQ(SplitWith(PreTokenizerKind::kLlama3, "WE'LL"), (Pieces{"WE", "'LL"}));
  EXPECT_EQ(SplitWith(PreTokenizerKind::kLlama3, "(hello)\n\nworld"),
            (Pieces{"(hello", ")\n\n", "world"}));
}

TEST(PreTokenizer, StarcoderAndFalconDigits) {
  EXPECT_EQ(SplitWith(PreTokenizerKind::kStarcoder, "x 123"), (Pieces{"x", " ", "1", "2", "3"}));
  EXPECT_EQ(SplitWith(PreTokenizerKind::kFalcon, "1234567"), (Pieces{"123", "456", "7"}));
}

TEST(PreTokenizer, InvalidUtf8IsOnePiece) {
  EXPECT_EQ(SplitWith(PreTokenizerKind::kGpt2, "ab \xFF cd"), (Pieces{"ab \xFF cd"}));
  EXPECT_TRUE(SplitWith(PreTokenizerKind::kGpt2, "").empty());
}

// ---------------------------------------------------------------------------
// UTF-8.

TEST(Utf8, Validation) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ASCII"));
  EXPECT_TRUE(IsValidUtf8("\xC3\xA9"));                 // é
  EXPECT_TRUE(IsValidUtf8("\xE2\x82\xAC"));             // €
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\xA6\x99"));         // 🦙
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));         // U+10FFFF
  EXPECT_TRUE(IsValidUtf8("\xED\x9F\xBF"));             // U+D7FF
  EXPECT_TRUE(IsValidUtf8(std::string_view("\0", 1)));  // NUL is a character
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));                // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xC1\xBF"));                // overlong
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));            // overlong
  EXPECT_FALSE(IsValidUtf8("\xF0\x80\x80\xAF"));        // overlong
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));            // U+D800 surrogate
  EXPECT_FALSE(IsValidUtf8("\xED\xBF\xBF"));            // U+DFFF surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));        // U+110000
  EXPECT_FALSE(IsValidUtf8("\xF5\x80\x80\x80"));        // lead beyond F4
  EXPECT_FALSE(IsValidUtf8("\xFF"));
  EXPECT_FALSE(IsValidUtf8("\x80"));            // lone continuation
  EXPECT_FALSE(IsValidUtf8("\xC3"));            // truncated
  EXPECT_FALSE(IsValidUtf8("\xE2\x82"));        // truncated
  EXPECT_FALSE(IsValidUtf8("ab\xF0\x9F\xA6"));  // truncated at end
  EXPECT_FALSE(IsValidUtf8("\xC3\x28"));        // bad continuation
}

TEST(Utf8, StreamDecoderHoldsBackIncompleteCharacters) {
  const std::string text = "\xC3\xA9\xF0\x9F\xA6\x99";  // "é🦙"
  Utf8StreamDecoder decoder;
  std::vector<std::string> emitted;
  for (char byte : text) emitted.push_back(decoder.Push(std::string_view(&byte, 1)));
  EXPECT_EQ(emitted, (std::vector<std::string>{"", "\xC3\xA9", "", "", "", "\xF0\x9F\xA6\x99"}));
  EXPECT_EQ(decoder.pending(), 0u);
  EXPECT_EQ(decoder.Finish(), "");
}

TEST(Utf8, StreamDecoderReplacesInvalidBytes) {
  const std::string kFffd = "\xEF\xBF\xBD";
  Utf8StreamDecoder decoder;
  EXPECT_EQ(decoder.Push("a\xFF"), "a" + kFffd);
  EXPECT_EQ(decoder.Push("\x80"), kFffd);   // lone continuation
  EXPECT_EQ(decoder.Push("\xE2\x82"), "");  // held back
  EXPECT_EQ(decoder.pending(), 2u);
  EXPECT_EQ(decoder.Push("x"), kFffd + "x");                       // cannot complete any more
  EXPECT_EQ(decoder.Push("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogate
  EXPECT_EQ(decoder.Push("\xF0\x9F"), "");
  EXPECT_EQ(decoder.Finish(), kFffd);  // truncated at the end
  EXPECT_EQ(decoder.pending(), 0u);
  EXPECT_EQ(decoder.Push("ok"), "ok");  // reusable after Finish
}

// ---------------------------------------------------------------------------
// Small hand-made vocabularies (no shared data needed).

absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromWriter(const GgufWriter& writer,
                                                               const ScratchDir& dir,
                                                               std::unique_ptr<GgufFile>* gguf) {
  const fs::path path = dir.file("vocab.gguf");
  if (absl::Status status = writer.WriteFile(path.string()); !status.ok()) return status;
  absl::StatusOr<std::unique_ptr<GgufFile>> opened = GgufFile::Open(path.string());
  if (!opened.ok()) return opened.status();
  *gguf = *std::move(opened);
  return Tokenizer::FromGguf(**gguf);
}

// A byte-level BPE vocabulary: the 256 byte symbols, then a few merges.
GgufWriter TinyBpeWriter(std::string pre) {
  GgufWriter writer;
  writer.AddString("tokenizer.ggml.model", "gpt2");
  writer.AddString("tokenizer.ggml.pre", std::move(pre));
  // Token i < 256 is the printable symbol of byte i (GPT-2's mapping).
  std::vector<std::string> tokens;
  char32_t substitute = 0x100;
  for (int byte = 0; byte < 256; ++byte) {
    const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
                           (byte >= 0xAE && byte <= 0xFF);
    std::string symbol;
    utf8::AppendCodePoint(printable ? static_cast<char32_t>(byte) : substitute++, &symbol);
    tokens.push_back(symbol);
  }
  for (const char* token : {"ab", "abc",
                            "\xC4\xA0"
                            "a",
                            "<|end|>"})
    tokens.push_back(token);
  std::vector<int32_t> types(tokens.size(), 1);
  types.back() = 3;  // <|end|> is a control token
  writer.AddStringArray("tokenizer.ggml.tokens", tokens);
  writer.AddInt32Array("tokenizer.ggml.token_type", types);
  writer.AddStringArray("tokenizer.ggml.merges", {"a b", "ab c", "\xC4\xA0 a"});
  writer.AddUint32("tokenizer.ggml.eos_token_id", 259);
  return writer;
}

TEST(HandMadeVocab, BpeMergesByRank) {
  ScratchDir dir("kvs_tokenizer_test");
  std::unique_ptr<GgufFile> gguf;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      TokenizerFromWriter(TinyBpeWriter("gpt-2"), dir, &gguf);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const Tokenizer& bpe = **tokenizer;
  constexpr int32_t kAb = 256, kAbc = 257, kSpaceA = 258, kEnd = 259;
  // "abc a": pieces "abc" and " a"; merges a+b (rank 0), ab+c (rank 1), Ġ+a.
  EXPECT_EQ(bpe.Encode("abc a", false), (std::vector<int32_t>{kAbc, kSpaceA}));
  EXPECT_EQ(bpe.Encode("abd", false), (std::vector<int32_t>{kAb, 'd'}));
  EXPECT_EQ(bpe.Decode(bpe.Encode("abc a\n\t\xC3\xA9", false)), "abc a\n\t\xC3\xA9");
  EXPECT_EQ(bpe.Encode("x<|end|>", false, true), (std::vector<int32_t>{'x', kEnd}));
  EXPECT_NE(bpe.Encode("x<|end|>", false, false).back(), kEnd);
  EXPECT_EQ(bpe.end_of_generation_ids(), (std::vector<int32_t>{kEnd}));
  EXPECT_EQ(bpe.eos_id(), kEnd);
  EXPECT_FALSE(bpe.add_bos());
  EXPECT_EQ(bpe.bos_id(), -1);
}

// End-of-generation tokens found by text (<|eom_id|>, Llama 3.1's) and by
// the fill-in-the-middle metadata keys, as llama.cpp finds them.
TEST(HandMadeVocab, EndOfGenerationComesFromTextsAndFimKeys) {
  GgufWriter writer;
  writer.AddString("tokenizer.ggml.model", "gpt2");
  writer.AddString("tokenizer.ggml.pre", "gpt-2");
  writer.AddStringArray("tokenizer.ggml.tokens",
                        {"a", "b", "<|eom_id|>", "<my_file_sep>", "<|repo_name|>", "<s>"});
  writer.AddInt32Array("tokenizer.ggml.token_type", {1, 1, 1, 3, 3, 3});
  writer.AddStringArray("tokenizer.ggml.merges", {});
  writer.AddUint32("tokenizer.ggml.fim_sep_token_id", 3);
  ScratchDir dir("kvs_tokenizer_test");
  std::unique_ptr<GgufFile> gguf;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = TokenizerFromWriter(writer, dir, &gguf);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->end_of_generation_ids(), (std::vector<int32_t>{2, 3, 4}));
  EXPECT_FALSE((*tokenizer)->IsEndOfGeneration(5));
  // A normal-typed <|eom_id|> becomes a control token, as in llama.cpp.
  EXPECT_EQ((*tokenizer)->token_type(2), TokenType::kControl);
}

TEST(HandMadeVocab, SpmMergesByScoreAndFallsBackToBytes) {
  GgufWriter writer;
  writer.AddString("tokenizer.ggml.model", "llama");
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    tokens.push_back(name);
    types.push_back(6);
  }
  // "▁", "a", "b", "c", "ab" (score 1), "bc" (score 2), "▁a" (score 0.5).
  const std::vector<std::pair<std::string, float>> words = {{"\xE2\x96\x81", 0},
                                                            {"a", 0},
                                                            {"b", 0},
                                                            {"c", 0},
                                                            {"ab", 1},
                                                            {"bc", 2},
                                                            {"\xE2\x96\x81"
                                                             "a",
                                                             0.5f}};
  std::vector<float> scores(tokens.size(), 0.0f);
  for (const auto& [word, score] : words) {
    tokens.push_back(word);
    types.push_back(1);
    scores.push_back(score);
  }
  writer.AddStringArray("tokenizer.ggml.tokens", tokens);
  writer.AddInt32Array("tokenizer.ggml.token_type", types);
  writer.AddFloat32Array("tokenizer.ggml.scores", scores);
  ScratchDir dir("kvs_tokenizer_test");
  std::unique_ptr<GgufFile> gguf;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = TokenizerFromWriter(writer, dir, &gguf);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const Tokenizer& spm = **tokenizer;
  constexpr int32_t kSpace = 259, kAb = 263, kBc = 264, kSpaceA = 265;
  // "abc" -> "▁abc": bc (2) wins over ab (1), then ▁a (0.5).
  EXPECT_EQ(spm.Encode("abc", false), (std::vector<int32_t>{kSpaceA, kBc}));
  EXPECT_EQ(spm.Encode("abc", true), (std::vector<int32_t>{1, kSpaceA, kBc}));
  // "ab" -> "▁ab": ab (1) beats ▁a (0.5).
  EXPECT_EQ(spm.Encode("ab", false), (std::vector<int32_t>{kSpace, kAb}));
  // "é" is not a token: its two bytes.
  EXPECT_EQ(spm.Encode("\xC3\xA9", false), (std::vector<int32_t>{kSpace, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(spm.Decode(spm.Encode("c b\xC3\xA9", false)), " c b\xC3\xA9");
}

// Scores that tie merge leftmost first (0.0 and -0.0 tie too), and a NaN
// score merges after every number, in a short text (the merge queue's
// small heap) and in a long one (its buckets) alike.
TEST(HandMadeVocab, SpmTiedScoresMergeLeftmostFirstAndANanScoreMergesLast) {
  const auto make = [](float ab_score, float bc_score, ScratchDir& dir, std::unique_ptr<GgufFile>* gguf) {
    GgufWriter writer;
    writer.AddString("tokenizer.ggml.model", "llama");
    const std::vector<std::pair<std::string, float>> words = {
        {"<unk>", 0}, {"<s>", 0}, {"</s>", 0}, {"\xE2\x96\x81", 0}, {"a", 0}, {"b", 0}, {"c", 0},
        {"bc", bc_score}, {"ab", ab_score}};  // bc first: a tie is not won by the lower id
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    std::vector<float> scores;
    for (const auto& [word, score] : words) {
      tokens.push_back(word);
      types.push_back(tokens.size() <= 3 ? (tokens.size() == 1 ? 2 : 3) : 1);
      scores.push_back(score);
    }
    writer.AddStringArray("tokenizer.ggml.tokens", tokens);
    writer.AddInt32Array("tokenizer.ggml.token_type", types);
    writer.AddFloat32Array("tokenizer.ggml.scores", scores);
    return TokenizerFromWriter(writer, dir, gguf);
  };
  constexpr int32_t kSpace = 3, kA = 4, kC = 6, kBc = 7, kAb = 8;
  std::string long_text;
  for (int i = 0; i < 100; ++i) long_text += "abc";
  const auto repeat = [](std::vector<int32_t> unit, int n) {
    std::vector<int32_t> out = {kSpace};
    for (int i = 0; i < n; ++i) out.insert(out.end(), unit.begin(), unit.end());
    return out;
  };
  struct Case {
    float ab, bc;
    std::vector<int32_t> unit;  // what each "abc" becomes
  };
  for (const Case& c : {Case{1.0f, 1.0f, {kAb, kC}}, Case{0.0f, -0.0f, {kAb, kC}},
                        Case{-0.0f, 0.0f, {kAb, kC}}, Case{std::nanf(""), -1000.0f, {kA, kBc}},
                        Case{-5.0f, std::nanf(""), {kAb, kC}}}) {
    SCOPED_TRACE(::testing::Message() << "ab " << c.ab << ", bc " << c.bc);
    ScratchDir dir("kvs_tokenizer_test");
    std::unique_ptr<GgufFile> gguf;
    absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = make(c.ab, c.bc, dir, &gguf);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    EXPECT_EQ((*tokenizer)->Encode("abc", false), repeat(c.unit, 1));
    EXPECT_EQ((*tokenizer)->Encode(long_text, false), repeat(c.unit, 100));
  }
}

TEST(HandMadeVocab, UnknownModelIsInvalidArgument) {
  GgufWriter writer;
  writer.AddString("tokenizer.ggml.model", "bert");
  writer.AddStringArray("tokenizer.ggml.tokens", {"a", "b"});
  ScratchDir dir("kvs_tokenizer_test");
  std::unique_ptr<GgufFile> gguf;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = TokenizerFromWriter(writer, dir, &gguf);
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tokenizer.status().message().find("bert"), absl::string_view::npos)
      << tokenizer.status();
}

TEST(HandMadeVocab, UnknownPreIsInvalidArgument) {
  ScratchDir dir("kvs_tokenizer_test");
  std::unique_ptr<GgufFile> gguf;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      TokenizerFromWriter(TinyBpeWriter("no-such-pre"), dir, &gguf);
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tokenizer.status().message().find("no-such-pre"), absl::string_view::npos)
      << tokenizer.status();
}

TEST(HandMadeVocab, InconsistentVocabulariesAreInvalidArgument) {
  {
    GgufWriter writer = TinyBpeWriter("gpt-2");
    writer.AddUint32("tokenizer.ggml.bos_token_id", 100000);  // out of range
    ScratchDir dir("kvs_tokenizer_test");
    std::unique_ptr<GgufFile> gguf;
    const absl::Status status = TokenizerFromWriter(writer, dir, &gguf).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("bos_token_id"), absl::string_view::npos) << status;
  }
  {
    GgufWriter writer = TinyBpeWriter("gpt-2");
    writer.AddUint32("tokenizer.ggml.bos_token_id", 0xFFFFFFFF);  // "none"
    ScratchDir dir("kvs_tokenizer_test");
    std::unique_ptr<GgufFile> gguf;
    absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = TokenizerFromWriter(writer, dir, &gguf);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    EXPECT_EQ((*tokenizer)->bos_id(), -1);
  }
  {
    GgufWriter writer;
    writer.AddString("tokenizer.ggml.model", "llama");
    writer.AddStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
    writer.AddFloat32Array("tokenizer.ggml.scores", {0.0f, 0.0f});  // one short
    ScratchDir dir("kvs_tokenizer_test");
    std::unique_ptr<GgufFile> gguf;
    const absl::Status status = TokenizerFromWriter(writer, dir, &gguf).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("scores"), absl::string_view::npos) << status;
  }
  {
    GgufWriter writer;
    writer.AddString("tokenizer.ggml.model", "gpt2");
    writer.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "a"});  // duplicate
    writer.AddStringArray("tokenizer.ggml.merges", {"a b"});
    ScratchDir dir("kvs_tokenizer_test");
    std::unique_ptr<GgufFile> gguf;
    const absl::Status status = TokenizerFromWriter(writer, dir, &gguf).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("duplicate"), absl::string_view::npos) << status;
  }
  {
    GgufWriter writer;
    writer.AddString("general.name", "no tokenizer");
    ScratchDir dir("kvs_tokenizer_test");
    std::unique_ptr<GgufFile> gguf;
    EXPECT_EQ(TokenizerFromWriter(writer, dir, &gguf).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace kvs

namespace kvs {
namespace {

TEST(EncodeContinuationTest, AppendingTextTokenizesLikeTheWholeText) {
  const std::string path = std::string(KVS_SHARED_DIR) + "/vocab/ggml-vocab-llama-spm.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "../shared/vocab not present";
  auto gguf = GgufFile::Open(path);
  ASSERT_TRUE(gguf.ok());
  auto tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok());
  std::vector<int32_t> whole = (*tok)->Encode("Hello world", false);
  std::vector<int32_t> parts = (*tok)->Encode("Hello", false);
  std::vector<int32_t> rest = (*tok)->EncodeContinuation(" world");
  parts.insert(parts.end(), rest.begin(), rest.end());
  EXPECT_EQ(parts, whole);
  EXPECT_EQ((*tok)->Decode(rest), " world");
}

}  // namespace
}  // namespace kvs
