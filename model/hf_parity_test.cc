// Hugging Face parity of the tokenizers on the real Qwen3 and Llama 3
// vocabularies (../shared/vocab): the cases where llama.cpp's tokenizer and
// Hugging Face's differ (NFC normalization, U+180E, Unicode 15 letters and
// digits), the control-token vectors, and the end-of-generation sets. The
// expected ids are Hugging Face's. Tests skip when ../shared is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/gguf_file.h"
#include "model/tokenizer.h"

namespace kvs {
namespace {

namespace fs = std::filesystem;

const fs::path kVocabDir = fs::path(KVS_SHARED_DIR) / "vocab";

struct Loaded {
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Tokenizer> tokenizer;
};

Loaded LoadVocabulary(const std::string& name) {
  Loaded loaded;
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf =
      GgufFile::Open((kVocabDir / absl::StrCat("ggml-vocab-", name, ".gguf")).string());
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  if (!gguf.ok()) return loaded;
  loaded.gguf = *std::move(gguf);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf(*loaded.gguf);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  if (tokenizer.ok()) loaded.tokenizer = *std::move(tokenizer);
  return loaded;
}

std::vector<nlohmann::json> ReadJsonLines(const fs::path& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path, std::ios::binary);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  }
  return lines;
}

bool HasFlag(const nlohmann::json& line, const std::string& flag) {
  for (const nlohmann::json& f : line.value("flags", nlohmann::json::array())) {
    if (f == flag) return true;
  }
  return false;
}

// Runs every line of `file`: {text, ids, flags} tokenized as the flags say.
void ExpectEveryLineMatches(const std::string& vocabulary, const std::string& file) {
  const fs::path path = kVocabDir / absl::StrCat("ggml-vocab-", vocabulary, ".", file);
  if (!fs::exists(path)) GTEST_SKIP() << "shared data not found: " << path;
  Loaded loaded = LoadVocabulary(vocabulary);
  ASSERT_NE(loaded.tokenizer, nullptr);
  const std::vector<nlohmann::json> lines = ReadJsonLines(path);
  ASSERT_FALSE(lines.empty()) << path;
  for (const nlohmann::json& line : lines) {
    const std::string text = line.at("text");
    const std::vector<int32_t> expected = line.at("ids");
    const std::vector<int32_t> ids = loaded.tokenizer->Encode(
        text, /*add_special=*/!HasFlag(line, "--no-bos"), HasFlag(line, "--parse-special"));
    EXPECT_EQ(ids, expected) << vocabulary << " " << file << ": " << line.dump();
  }
}

TEST(HuggingFaceParity, Qwen3MatchesWhereLlamaCppDiverges) {
  ExpectEveryLineMatches("qwen3", "hf-divergent.jsonl");
}

TEST(HuggingFaceParity, Llama3MatchesWhereLlamaCppDiverges) {
  ExpectEveryLineMatches("llama3", "hf-divergent.jsonl");
}

TEST(HuggingFaceParity, Qwen3ParsesControlTokens) {
  ExpectEveryLineMatches("qwen3", "parse-special.jsonl");
}

TEST(HuggingFaceParity, Llama3ParsesControlTokens) {
  ExpectEveryLineMatches("llama3", "parse-special.jsonl");
}

// Only Qwen's tokenizer normalizes: "é" written as e + U+0301 is the
// precomposed "é" to Qwen3, but stays two characters to Llama 3.
TEST(HuggingFaceParity, OnlyQwenNormalizesToNfc) {
  if (!fs::is_directory(kVocabDir)) GTEST_SKIP() << "shared data not found: " << kVocabDir;
  Loaded qwen = LoadVocabulary("qwen3");
  Loaded llama = LoadVocabulary("llama3");
  ASSERT_NE(qwen.tokenizer, nullptr);
  ASSERT_NE(llama.tokenizer, nullptr);
  const std::string decomposed = "caf" "e\xCC\x81";
  const std::string precomposed = "caf\xC3\xA9";
  EXPECT_EQ(qwen.tokenizer->Encode(decomposed, false), qwen.tokenizer->Encode(precomposed, false));
  EXPECT_NE(llama.tokenizer->Encode(decomposed, false),
            llama.tokenizer->Encode(precomposed, false));
  EXPECT_EQ(llama.tokenizer->Decode(llama.tokenizer->Encode(decomposed, false)), decomposed);
}

std::vector<int32_t> IdsOf(const Tokenizer& tokenizer, std::initializer_list<const char*> texts) {
  std::vector<int32_t> ids;
  for (const char* text : texts) {
    const std::vector<int32_t> one = tokenizer.Encode(text, false, /*parse_special=*/true);
    EXPECT_EQ(one.size(), 1u) << text << " is not one token";
    if (one.size() == 1) ids.push_back(one[0]);
  }
  return ids;
}

TEST(EndOfGeneration, Qwen3StopsOnEveryTokenLlamaCppRecognises) {
  if (!fs::is_directory(kVocabDir)) GTEST_SKIP() << "shared data not found: " << kVocabDir;
  Loaded qwen = LoadVocabulary("qwen3");
  ASSERT_NE(qwen.tokenizer, nullptr);
  const std::vector<int32_t> stops = IdsOf(
      *qwen.tokenizer,
      {"<|endoftext|>", "<|im_end|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"});
  for (int32_t id : stops) EXPECT_TRUE(qwen.tokenizer->IsEndOfGeneration(id)) << id;
  EXPECT_EQ(qwen.tokenizer->end_of_generation_ids().size(), 5u);
  for (int32_t id : IdsOf(*qwen.tokenizer, {"<|im_start|>", "<think>", "<|fim_prefix|>"})) {
    EXPECT_FALSE(qwen.tokenizer->IsEndOfGeneration(id)) << id;
  }
  EXPECT_EQ(stops, (std::vector<int32_t>{151643, 151645, 151662, 151663, 151664}));
}

// Llama 3.0's vocabulary has no <|eom_id|> (Llama 3.1 added it); where a
// vocabulary has it, it ends generation too (see the hand-made test below).
TEST(EndOfGeneration, Llama3StopsOnEveryTokenLlamaCppRecognises) {
  if (!fs::is_directory(kVocabDir)) GTEST_SKIP() << "shared data not found: " << kVocabDir;
  Loaded llama = LoadVocabulary("llama3");
  ASSERT_NE(llama.tokenizer, nullptr);
  const std::vector<int32_t> stops = IdsOf(*llama.tokenizer, {"<|eot_id|>", "<|end_of_text|>"});
  for (int32_t id : stops) EXPECT_TRUE(llama.tokenizer->IsEndOfGeneration(id)) << id;
  EXPECT_EQ(llama.tokenizer->end_of_generation_ids(), (std::vector<int32_t>{128001, 128009}));
  for (int32_t id : IdsOf(*llama.tokenizer, {"<|begin_of_text|>", "<|start_header_id|>"})) {
    EXPECT_FALSE(llama.tokenizer->IsEndOfGeneration(id)) << id;
  }
}

}  // namespace
}  // namespace kvs
