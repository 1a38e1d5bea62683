// InputResolver on real vocabularies (../shared/vocab): what text, tokens
// and chat messages add to a session, and the chat state they leave.
#include "service/input_resolver.h"

#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace kvs {
namespace {

namespace v1 = kvsession::v1;

struct Vocabulary {
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Tokenizer> tokenizer;
};

Vocabulary Load(const std::string& path) {
  Vocabulary v;
  if (!std::filesystem::exists(path)) return v;
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(path);
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  if (!gguf.ok()) return v;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf(**gguf);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  if (!tokenizer.ok()) return v;
  v.gguf = *std::move(gguf);
  v.tokenizer = *std::move(tokenizer);
  return v;
}

std::string VocabPath(const std::string& name) {
  return absl::StrCat(KVS_SHARED_DIR, "/vocab/ggml-vocab-", name, ".gguf");
}

constexpr InputLimits kLimits{4096, 1 << 16};

v1::Input Messages(std::initializer_list<std::pair<const char*, const char*>> messages) {
  v1::Input input;
  for (const auto& [role, content] : messages) {
    v1::ChatMessage* m = input.mutable_messages()->add_messages();
    m->set_role(role);
    m->set_content(content);
  }
  return input;
}

#define LOAD_OR_SKIP(var, path)                                                  \
  Vocabulary var = Load(path);                                                   \
  if (var.tokenizer == nullptr) GTEST_SKIP() << path << " absent";               \
  absl::StatusOr<InputResolver> var##_resolver =                                 \
      InputResolver::Create(*var.gguf, *var.tokenizer, "", kLimits);             \
  ASSERT_TRUE(var##_resolver.ok()) << var##_resolver.status();

TEST(InputResolverTest, AFirstTurnAfterTheSessionsBosDoesNotRepeatTheBosTheTemplateWrites) {
  LOAD_OR_SKIP(llama3, VocabPath("llama3"));
  const int32_t bos = llama3.tokenizer->bos_id();
  ASSERT_GE(bos, 0);
  GenerationPromptChoice generate;
  const v1::Input input = Messages({{"user", "Hello! Who are you?"}});
  absl::StatusOr<ResolvedInput> r =
      llama3_resolver->Resolve(&input, std::vector<int32_t>{bos}, ChatState{}, &generate);
  ASSERT_TRUE(r.ok()) << r.status();
  ChatTemplate chat = *ChatTemplate::Create(*llama3.gguf, *llama3.tokenizer);
  const std::vector<ChatMessage> whole = {{"user", "Hello! Who are you?"}};
  RenderedChat want = *chat.RenderConversation(whole, {});
  ASSERT_EQ(want.ids.front(), bos);
  std::vector<int32_t> got = {bos};
  got.insert(got.end(), r->ids.begin(), r->ids.end());
  EXPECT_EQ(got, want.ids);
  ASSERT_TRUE(r->chat.has_value());
  EXPECT_EQ(r->chat->after_input, (ChatState{.started = true, .turn_open = true}));
  EXPECT_FALSE(r->chat->end_of_turn_ids.empty());
}

TEST(InputResolverTest, AddGenerationPromptTrueClosesAnOpenTurnAndFalseAddsNothing) {
  LOAD_OR_SKIP(qwen3, VocabPath("qwen3"));
  const std::vector<int32_t> session = {151644, 872, 198};
  const ChatState open{.started = true, .turn_open = true};
  GenerationPromptChoice always{.add = true};
  absl::StatusOr<ResolvedInput> r = qwen3_resolver->Resolve(nullptr, session, open, &always);
  ASSERT_TRUE(r.ok()) << r.status();
  // <|im_end|> "\n" <|im_start|> "assistant" "\n"
  EXPECT_EQ(r->ids, (std::vector<int32_t>{151645, 198, 151644, 77091, 198}));
  GenerationPromptChoice never{.add = false};
  r = qwen3_resolver->Resolve(nullptr, session, open, &never);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->ids.empty());
  EXPECT_EQ(r->chat->after_input, open);  // the open turn continues
  GenerationPromptChoice automatic;
  r = qwen3_resolver->Resolve(nullptr, session, open, &automatic);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->ids.empty());
}

// A turn the model ended with <|im_end|> where the "\n" after it did not
// fit (an ERROR session at its limit) or was cut off (a truncation): the
// next turn, or the generation prompt, comes after that "\n", as in
// Hugging Face's rendering (qwen3.jsonl: <|im_end|> 198 <|im_start|>).
TEST(InputResolverTest, ATurnEndedByABareEndOfTurnTokenGetsTheTextAfterItFirst) {
  LOAD_OR_SKIP(qwen3, VocabPath("qwen3"));
  const std::vector<int32_t> bare = {151644, 77091, 198, 9707, 151645};  // ...assistant\nHello<|im_end|>
  const ChatState closed{.started = true, .turn_open = false};
  GenerationPromptChoice automatic;
  absl::StatusOr<ResolvedInput> r = qwen3_resolver->Resolve(nullptr, bare, closed, &automatic);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ids, (std::vector<int32_t>{198, 151644, 77091, 198}));
  const v1::Input next = Messages({{"user", "Hello"}});
  r = qwen3_resolver->Resolve(&next, bare, closed, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ids, (std::vector<int32_t>{198, 151644, 872, 198, 9707, 151645, 198}));
  // With its "\n", or in a session that is not a chat, nothing is added.
  std::vector<int32_t> whole = bare;
  whole.push_back(198);
  r = qwen3_resolver->Resolve(&next, whole, closed, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ids.front(), 151644);
  GenerationPromptChoice always{.add = true};
  r = qwen3_resolver->Resolve(nullptr, bare, ChatState{}, &always);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ids.front(), 151644);
}

TEST(InputResolverTest, TextOnAChatLeavesItsStateAndPlainTextSessionsGetNoChatJob) {
  LOAD_OR_SKIP(qwen3, VocabPath("qwen3"));
  v1::Input text;
  text.set_text(" more");
  const ChatState closed{.started = true, .turn_open = false};
  absl::StatusOr<ResolvedInput> r = qwen3_resolver->Resolve(&text, std::vector<int32_t>{1, 2}, closed, nullptr);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->chat.has_value());
  EXPECT_EQ(r->chat->after_input, closed);
  r = qwen3_resolver->Resolve(&text, std::vector<int32_t>{1, 2}, ChatState{}, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->chat.has_value());
}

TEST(InputResolverTest, MessagesWithoutATemplateAreFailedPreconditionNamingTheFamilies) {
  LOAD_OR_SKIP(model, absl::StrCat(KVS_SHARED_DIR, "/models/aidreams260K.gguf"));
  EXPECT_EQ(model_resolver->chat_family(), "");
  const v1::Input hi = Messages({{"user", "Hi"}});
  absl::StatusOr<ResolvedInput> r = model_resolver->Resolve(&hi, {}, ChatState{}, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("qwen3"), std::string::npos) << r.status();
  v1::Input text;
  text.set_text("Hi");
  EXPECT_TRUE(model_resolver->Resolve(&text, {}, ChatState{}, nullptr).ok());
  EXPECT_EQ(InputResolver::Create(*model.gguf, *model.tokenizer, "jinja9", kLimits).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(InputResolverTest, MessageContentOverTheInputLimitIsInvalidArgument) {
  LOAD_OR_SKIP(qwen3, VocabPath("qwen3"));
  const std::string big(kLimits.max_input_bytes, 'a');
  const v1::Input input = Messages({{"user", big.c_str()}});
  absl::StatusOr<ResolvedInput> r = qwen3_resolver->Resolve(&input, {}, ChatState{}, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("65536"), std::string::npos) << r.status();
}

// Each message renders at least one token, so more messages than the
// context cannot fit: OUT_OF_RANGE before any is rendered (short empty
// user messages fit the byte limit by the thousand).
TEST(InputResolverTest, MoreMessagesThanTheContextHoldsTokensIsOutOfRange) {
  LOAD_OR_SKIP(qwen3, VocabPath("qwen3"));
  v1::Input input;
  for (int i = 0; i <= kLimits.max_context; ++i) input.mutable_messages()->add_messages()->set_role("user");
  absl::StatusOr<ResolvedInput> r = qwen3_resolver->Resolve(&input, {}, ChatState{}, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange) << r.status();
  EXPECT_NE(r.status().message().find("4097 messages exceed the context limit of 4096"), std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace kvs
