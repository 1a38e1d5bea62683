// TokenStream on a real vocabulary (GPT-2's byte-level BPE from
// ../shared/vocab): the text a generation releases and why it ends.
#include "model/token_stream.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "model/gguf_file.h"

namespace kvs {
namespace {

const std::filesystem::path kVocab =
    std::filesystem::path(KVS_SHARED_DIR) / "vocab" / "ggml-vocab-gpt-2.gguf";

class TokenStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kVocab)) GTEST_SKIP() << kVocab << " is absent";
    absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(kVocab.string());
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromGguf(**gguf);
    ASSERT_TRUE(tok.ok()) << tok.status();
    gguf_ = *std::move(gguf);
    tok_ = *std::move(tok);
  }
  std::vector<int32_t> Ids(const std::string& text) { return tok_->Encode(text, false, false); }

  // Pushes `ids` until the stream finishes; returns everything released.
  std::string Run(TokenStream& stream, const std::vector<int32_t>& ids, int start_length = 1) {
    std::string out;
    int length = start_length;
    for (int32_t id : ids) {
      out += stream.Push(id, ++length);
      if (stream.finished()) break;
    }
    return out + stream.Finish();
  }

  static TokenStreamOptions Options(int max_tokens, int max_context,
                                    std::vector<std::string> stop = {}, bool ignore_eos = false) {
    TokenStreamOptions o;
    o.max_tokens = max_tokens;
    o.max_context = max_context;
    o.stop = std::move(stop);
    o.ignore_eos = ignore_eos;
    return o;
  }

  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(TokenStreamTest, ReleasesTheTextOfEveryTokenAndEndsAtMaxTokens) {
  const std::vector<int32_t> ids = Ids("Hello world, how are you");
  TokenStream stream(tok_.get(), Options(static_cast<int>(ids.size()), 1000));
  EXPECT_EQ(Run(stream, ids), "Hello world, how are you");
  EXPECT_EQ(stream.reason(), FinishReason::kLength);
  EXPECT_EQ(stream.generated(), static_cast<int>(ids.size()));
}

TEST_F(TokenStreamTest, AnEndOfGenerationTokenEndsWithStopTokenAndReleasesNoText) {
  ASSERT_GE(tok_->eos_id(), 0);
  std::vector<int32_t> ids = Ids("Hi there");
  ids.push_back(tok_->eos_id());
  ids.push_back(Ids(" never")[0]);
  TokenStream stream(tok_.get(), Options(100, 1000));
  EXPECT_EQ(Run(stream, ids), "Hi there");
  EXPECT_EQ(stream.reason(), FinishReason::kStopToken);
  EXPECT_EQ(stream.generated(), static_cast<int>(ids.size()) - 1);
}

TEST_F(TokenStreamTest, IgnoreEosTreatsTheEndTokenAsOrdinary) {
  std::vector<int32_t> ids = Ids("a");
  ids.push_back(tok_->eos_id());
  ids.push_back(Ids("b")[0]);
  TokenStream stream(tok_.get(), Options(3, 1000, {}, true));
  const std::string text = Run(stream, ids);
  EXPECT_EQ(stream.reason(), FinishReason::kLength);
  EXPECT_EQ(text.substr(0, 1), "a");
  EXPECT_EQ(text.substr(text.size() - 1), "b");
}

TEST_F(TokenStreamTest, AStopStringEndsGenerationAndIsNeverReleased) {
  const std::vector<int32_t> ids = Ids("The answer is 42. END of story");
  TokenStream stream(tok_.get(), Options(100, 1000, {"END"}));
  EXPECT_EQ(Run(stream, ids), "The answer is 42. ");
  EXPECT_EQ(stream.reason(), FinishReason::kStopSequence);
}

TEST_F(TokenStreamTest, TextHeldBackForAStopPrefixIsReleasedByFinish) {
  const std::vector<int32_t> ids = Ids("abc EN");
  TokenStream stream(tok_.get(), Options(static_cast<int>(ids.size()), 1000, {"END"}));
  std::string pushed;
  int length = 1;
  for (int32_t id : ids) pushed += stream.Push(id, ++length);
  EXPECT_EQ(pushed, "abc ");
  EXPECT_EQ(stream.Finish(), "EN");
}

TEST_F(TokenStreamTest, TheContextLimitEndsWithLength) {
  const std::vector<int32_t> ids = Ids("one two three four five");
  TokenStream stream(tok_.get(), Options(100, 3));
  Run(stream, ids, /*start_length=*/1);
  EXPECT_EQ(stream.reason(), FinishReason::kLength);
  EXPECT_EQ(stream.generated(), 2);
}

TEST_F(TokenStreamTest, AnIncompleteCharacterIsHeldUntilItCompletes) {
  // "é" is two bytes; GPT-2 byte tokens can split it. Push its byte tokens
  // one at a time: nothing is released until the character is whole.
  const std::vector<int32_t> ids = Ids("é");
  TokenStream stream(tok_.get(), Options(100, 1000));
  std::string out;
  int length = 1;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string text = stream.Push(ids[i], ++length);
    if (i + 1 < ids.size()) {
      EXPECT_EQ(text, "");
    }
    out += text;
  }
  EXPECT_EQ(out + stream.Finish(), "é");
}

TEST(FinishReasonName, NamesEveryReasonAsTheApiSpellsIt) {
  EXPECT_STREQ(FinishReasonName(FinishReason::kStopToken), "stop_token");
  EXPECT_STREQ(FinishReasonName(FinishReason::kStopSequence), "stop_sequence");
  EXPECT_STREQ(FinishReasonName(FinishReason::kLength), "length");
  EXPECT_STREQ(FinishReasonName(FinishReason::kCancelled), "cancelled");
  EXPECT_STREQ(FinishReasonName(FinishReason::kError), "error");
}

// Two generations, the first cut by max_tokens at every possible token:
// a character split between them is released whole by the second (which
// continues from the first's incomplete bytes), never as U+FFFD.
TEST_F(TokenStreamTest, ACharacterSplitBetweenTwoGenerationsIsReleasedWholeByTheSecond) {
  const std::string text = "a\xF0\x9D\x84\x9E\xE2\x82\xAC b";  // U+1D11E, U+20AC: split across tokens
  const std::vector<int32_t> ids = Ids(text);
  ASSERT_GT(ids.size(), 4u);
  int split_inside_a_character = 0;
  for (size_t cut = 1; cut < ids.size(); ++cut) {
    TokenStream first(tok_.get(), Options(static_cast<int>(cut), 1000));
    std::string out;
    for (size_t i = 0; i < cut; ++i) out += first.Push(ids[i], static_cast<int>(i + 2));
    ASSERT_EQ(first.reason(), FinishReason::kLength);
    out += first.Finish(/*keep_incomplete_character=*/true);
    const std::span<const int32_t> before(ids.data(), cut);
    TokenStreamOptions options = Options(1000, 1000);
    options.carry = TrailingIncompleteCharacter(*tok_, before);
    split_inside_a_character += !options.carry.empty();
    TokenStream second(tok_.get(), options);
    for (size_t i = cut; i < ids.size(); ++i) out += second.Push(ids[i], static_cast<int>(i + 2));
    out += second.Finish();
    EXPECT_EQ(out, text) << "cut after " << cut << " tokens";
  }
  EXPECT_GT(split_inside_a_character, 0) << "no cut fell inside a character";
}

}  // namespace
}  // namespace kvs
