// Tests for model/chat_template_family.h: detection from representative
// template snippets (as published in the families' tokenizer_config.json),
// names, and the exact text each family renders (the formats the families
// document; no vocabulary needed).
#include "model/chat_template_family.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace kvs {
namespace {

ChatFamily Detected(std::string_view template_text) {
  absl::StatusOr<ChatFormat> format = DetectChatFormat(template_text);
  EXPECT_TRUE(format.ok()) << format.status();
  return format.ok() ? format->family : ChatFamily::kChatMl;
}

// The text of `messages` (+ generation prompt) in `family`.
std::string Text(ChatFormat format, const std::vector<ChatMessage>& messages,
                 bool generation_prompt = true, bool enable_thinking = true) {
  std::vector<ChatPiece> pieces;
  const absl::Status status = AppendChatMessages(format, messages, {}, &pieces);
  EXPECT_TRUE(status.ok()) << status;
  if (generation_prompt) AppendChatGenerationPrompt(format, enable_thinking, &pieces);
  std::string text;
  for (const ChatPiece& piece : pieces) text += piece.text;
  return text;
}

std::string Text(ChatFamily family, const std::vector<ChatMessage>& messages,
                 bool generation_prompt = true) {
  return Text(ChatFormat{family, ""}, messages, generation_prompt);
}

const std::vector<ChatMessage> kSystemUserAssistantUser = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};

TEST(ChatTemplateFamily, DetectsEachFamilyFromItsTemplateText) {
  EXPECT_EQ(Detected("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                     "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"),
            ChatFamily::kChatMl);
  EXPECT_EQ(Detected("{%- if '</think>' in message.content %}<|im_start|>{{- '<think>\\n\\n' }}"),
            ChatFamily::kQwen3);
  EXPECT_EQ(Detected("{% set content = '<|start_header_id|>' + message['role'] + "
                     "'<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}"),
            ChatFamily::kLlama3);
  EXPECT_EQ(Detected("{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' %}"
                     "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"),
            ChatFamily::kLlama2);
  EXPECT_EQ(Detected("{{ bos_token }}{% for message in messages %}{{ '[INST] ' + "
                     "message['content'] + ' [/INST]' }}{{ message['content'] + eos_token}}"),
            ChatFamily::kMistral);
  EXPECT_EQ(Detected("{{'<|user|>\\n' + message['content'] + '<|end|>\\n' + "
                     "'<|assistant|>\\n'}}"),
            ChatFamily::kPhi3);
  EXPECT_EQ(Detected("{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + "
                     "'<end_of_turn>\\n' }}{{'<start_of_turn>model\\n'}}"),
            ChatFamily::kGemma);
  EXPECT_EQ(Detected("{{ 'User: ' + message['content'] + '\\n\\n' }}{{ 'Assistant: ' + "
                     "message['content'] + eos_token }}{{ 'Assistant:' }}"),
            ChatFamily::kDeepSeek);
  EXPECT_EQ(Detected("{{'<｜User｜>' + message['content']}}{{'<｜Assistant｜>' + "
                     "message['content'] + '<｜end▁of▁sentence｜>'}}"),
            ChatFamily::kDeepSeek3);
}

TEST(ChatTemplateFamily, UnrecognisedTemplateIsFailedPreconditionListingFamilies) {
  for (std::string_view text : {"{{ messages }}", ""}) {
    absl::StatusOr<ChatFormat> format = DetectChatFormat(text);
    ASSERT_FALSE(format.ok());
    EXPECT_EQ(format.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(format.status().message().find(SupportedChatFamilies()), std::string::npos);
  }
}

TEST(ChatTemplateFamily, NamesSelectFamiliesAndUnknownNamesAreInvalidArgument) {
  for (std::string_view name : {"chatml", "qwen3", "llama3", "llama2", "mistral", "phi3", "gemma",
                                "deepseek", "deepseek3"}) {
    absl::StatusOr<ChatFormat> format = ChatFormatFromName(name);
    ASSERT_TRUE(format.ok()) << name;
    EXPECT_EQ(ChatFamilyName(format->family), name);
  }
  absl::StatusOr<ChatFormat> unknown = ChatFormatFromName(std::string(1000, 'x'));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(unknown.status().message().size(), 200u);  // the name is not echoed whole
}

TEST(ChatTemplateFamily, ChatMlUsesTheTemplatesDefaultSystemPrompt) {
  absl::StatusOr<ChatFormat> qwen25 = DetectChatFormat(
      "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a "
      "helpful assistant.<|im_end|>\\n' }}{%- endif %}{{- '<|im_start|>' + message.role + '\\n' "
      "+ message.content + '<|im_end|>' + '\\n' }}");
  ASSERT_TRUE(qwen25.ok());
  EXPECT_EQ(Text(*qwen25, {{"user", "Hi"}}),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(Text(*qwen25, {{"system", "S"}, {"user", "Hi"}}, false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplateFamily, Llama2FoldsTheSystemPromptIntoTheFirstInstruction) {
  EXPECT_EQ(Text(ChatFamily::kLlama2, kSystemUserAssistantUser),
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s>"
            "<s>[INST] Bye [/INST]");
}

TEST(ChatTemplateFamily, MistralWritesOneBosAndEndsAnswersWithEos) {
  EXPECT_EQ(Text(ChatFamily::kMistral, kSystemUserAssistantUser),
            "<s>[INST] Be brief.\n\nHi [/INST]Hello!</s>[INST] Bye [/INST]");
}

TEST(ChatTemplateFamily, Phi3TagsEachRole) {
  EXPECT_EQ(Text(ChatFamily::kPhi3, kSystemUserAssistantUser),
            "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n"
            "<|user|>\nBye<|end|>\n<|assistant|>\n");
}

TEST(ChatTemplateFamily, GemmaCallsTheAssistantModelAndTrimsContent) {
  EXPECT_EQ(Text(ChatFamily::kGemma, {{"system", "Be brief."}, {"user", " Hi\n"},
                                      {"assistant", "Hello!"}, {"user", "Bye"}}),
            "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
            "<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplateFamily, DeepSeekFormats) {
  EXPECT_EQ(Text(ChatFamily::kDeepSeek, kSystemUserAssistantUser),
            "<｜begin▁of▁sentence｜>Be brief.\n\nUser: Hi\n\nAssistant: Hello!"
            "<｜end▁of▁sentence｜>User: Bye\n\nAssistant:");
  EXPECT_EQ(Text(ChatFamily::kDeepSeek3, kSystemUserAssistantUser),
            "<｜begin▁of▁sentence｜>Be brief.<｜User｜>Hi<｜Assistant｜>Hello!"
            "<｜end▁of▁sentence｜><｜User｜>Bye<｜Assistant｜>");
}

TEST(ChatTemplateFamily, Qwen3WithoutThinkingAddsAnEmptyThinkBlock) {
  EXPECT_EQ(Text(ChatFormat{ChatFamily::kQwen3, ""}, {{"user", "Hi"}}, true, false),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

// Qwen3's template keeps (or writes an empty) think block for assistant
// turns after the last user message, and drops it before.
TEST(ChatTemplateFamily, Qwen3KeepsReasoningOnlyAfterTheLastUserMessage) {
  const ChatFormat qwen3{ChatFamily::kQwen3, ""};
  EXPECT_EQ(Text(qwen3, {{"user", "Q"}, {"assistant", "<think>\nr\n</think>\n\nA"}}, false),
            "<|im_start|>user\nQ<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nr\n</think>\n\nA<|im_end|>\n");
  EXPECT_EQ(Text(qwen3, {{"user", "Q"}, {"assistant", "A"}}, false),
            "<|im_start|>user\nQ<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nA<|im_end|>\n");
  EXPECT_EQ(Text(qwen3, {{"user", "Q"}, {"assistant", "<think>r</think>A"}, {"user", "Q2"}}, false),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n"
            "<|im_start|>user\nQ2<|im_end|>\n");
}

TEST(ChatTemplateFamily, BadMessagesAreInvalidArgumentAndAddNothing) {
  std::vector<ChatPiece> pieces;
  const std::vector<std::vector<ChatMessage>> bad = {
      {{"user", "ok"}, {std::string(500, 'r'), "x"}},
      {{"user", "bad \xFF utf-8"}},
  };
  for (const std::vector<ChatMessage>& messages : bad) {
    const absl::Status status =
        AppendChatMessages(ChatFormat{ChatFamily::kChatMl, ""}, messages, {}, &pieces);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_LT(status.message().size(), 200u);
  }
  // Families without a system turn: a system message only at the start.
  const std::vector<ChatMessage> late = {{"user", "a"}, {"system", "b"}};
  const absl::Status late_system =
      AppendChatMessages(ChatFormat{ChatFamily::kGemma, ""}, late, {}, &pieces);
  EXPECT_EQ(late_system.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(pieces.empty());
}

}  // namespace
}  // namespace kvs

namespace kvs {
namespace {

// The rendering of a short conversation (+ generation prompt) cut before
// every turn-start marker: the conversation's start, then one piece per
// turn, each beginning with its marker.
std::vector<std::string> CutAtTurnStarts(ChatFamily family) {
  const std::vector<std::string> markers = ChatTurnStartMarkers(family);
  std::vector<ChatPiece> pieces;
  const std::vector<ChatMessage> messages = {{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};
  const absl::Status status = AppendChatMessages(ChatFormat{family, ""}, messages, {}, &pieces);
  EXPECT_TRUE(status.ok()) << status;
  AppendChatGenerationPrompt(ChatFormat{family, ""}, true, &pieces);
  std::vector<std::string> cut = {""};
  for (const ChatPiece& piece : pieces) {
    if (piece.is_marker && std::find(markers.begin(), markers.end(), piece.text) != markers.end()) {
      cut.emplace_back();
    }
    cut.back() += piece.text;
  }
  return cut;
}

using Cut = std::vector<std::string>;

TEST(ChatTurnStartMarkers, ChatMlAndQwen3TurnsOpenWithImStart) {
  const Cut want = {"", "<|im_start|>user\nHi<|im_end|>\n", "<|im_start|>assistant\nHello!<|im_end|>\n",
                    "<|im_start|>user\nBye<|im_end|>\n", "<|im_start|>assistant\n"};
  EXPECT_EQ(CutAtTurnStarts(ChatFamily::kChatMl), want);
  EXPECT_EQ(CutAtTurnStarts(ChatFamily::kQwen3), want);
}

TEST(ChatTurnStartMarkers, Llama3TurnsOpenWithStartHeaderAfterTheBos) {
  EXPECT_EQ(CutAtTurnStarts(ChatFamily::kLlama3),
            (Cut{"<|begin_of_text|>", "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
                 "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>",
                 "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>",
                 "<|start_header_id|>assistant<|end_header_id|>\n\n"}));
}

TEST(ChatTurnStartMarkers, Llama2ExchangesOpenWithBos) {
  EXPECT_EQ(CutAtTurnStarts(ChatFamily::kLlama2),
            (Cut{"", "<s>[INST] Hi [/INST] Hello! </s>", "<s>[INST] Bye [/INST]"}));
}

TEST(ChatTurnStartMarkers, MistralExchangesOpenWithInstAfterTheBos) {
  EXPECT_EQ(CutAtTurnStarts(ChatFamily::kMistral),
            (Cut{"<s>", "[INST] Hi [/INST]Hello!</s>", "[INST] Bye [/INST]"}));
}

TEST(ChatTurnStartMarkers, Phi3TurnsOpenWithTheirRoleTag) {
  EXPECT_EQ(CutAtTurnStarts(ChatFamily::kPhi3),
            (Cut{"", "<|user|>\nHi<|end|>\n", "<|assistant|>\nHello!<|end|>\n", "<|user|>\nBye<|end|>\n",
                 "<|assistant|>\n"}));
}

TEST(ChatTurnStartMarkers, GemmaTurnsOpenWithStartOfTurnAfterTheBos) {
  EXPECT_EQ(CutAtTurnStarts(ChatFamily::kGemma),
            (Cut{"<bos>", "<start_of_turn>user\nHi<end_of_turn>\n",
                 "<start_of_turn>model\nHello!<end_of_turn>\n", "<start_of_turn>user\nBye<end_of_turn>\n",
                 "<start_of_turn>model\n"}));
}

TEST(ChatTurnStartMarkers, DeepSeek3TurnsOpenWithTheirRoleMarker) {
  const std::string bos = "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
  const std::string eos = "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
  const std::string user = "<\xEF\xBD\x9CUser\xEF\xBD\x9C>", assistant = "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>";
  EXPECT_EQ(CutAtTurnStarts(ChatFamily::kDeepSeek3),
            (Cut{bos, user + "Hi", assistant + "Hello!" + eos, user + "Bye", assistant}));
}

TEST(ChatTurnStartMarkers, DeepSeekHasNoTurnMarkerSoSlidesByPages) {
  EXPECT_TRUE(ChatTurnStartMarkers(ChatFamily::kDeepSeek).empty());
  EXPECT_EQ(CutAtTurnStarts(ChatFamily::kDeepSeek).size(), 1u);
}

}  // namespace
}  // namespace kvs
