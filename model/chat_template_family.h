// Chat template families: which conversation format a model uses, found
// from the Jinja template text in the GGUF (`tokenizer.chat_template`) or
// chosen by name, and the format itself written as code: messages become a
// list of pieces (template text, message content, and the template's own
// marker tokens such as "<|im_start|>").
//
// Supported families (names for an explicit override):
//   chatml    <|im_start|>role\n...<|im_end|>\n (Qwen2, Qwen2.5; a default
//             system prompt written in the template is used when the
//             conversation has none)
//   qwen3     ChatML plus Qwen3's thinking rules: a whole conversation drops
//             the <think>...</think> of assistant turns before the last user
//             turn; enable_thinking=false adds "<think>\n\n</think>\n\n" after
//             the generation prompt
//   llama3    <|begin_of_text|><|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
//   llama2    <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s>
//   mistral   <s>[INST] ... [/INST]...</s> (system text before the first user text)
//   phi3      <|user|>\n...<|end|>\n<|assistant|>\n
//   gemma     <bos><start_of_turn>user\n...<end_of_turn>\n<start_of_turn>model\n
//   deepseek  DeepSeek LLM / V2: "User: ...\n\nAssistant: ...<｜end▁of▁sentence｜>"
//   deepseek3 DeepSeek V3 / R1: <｜User｜>...<｜Assistant｜>...<｜end▁of▁sentence｜>
//
// Detection looks for each family's distinctive markers in the template
// text (the idea of llama.cpp's llama_chat_detect_template); it does not run
// Jinja. Message roles are "system", "user" and "assistant".
//
// Thread safety: free functions over immutable data; safe to call
// concurrently. Nothing here needs a vocabulary (model/chat_template.h turns
// pieces into token ids).
#ifndef KVSESSION_MODEL_CHAT_TEMPLATE_FAMILY_H_
#define KVSESSION_MODEL_CHAT_TEMPLATE_FAMILY_H_

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kvs {

enum class ChatFamily {
  kChatMl,
  kQwen3,
  kLlama3,
  kLlama2,
  kMistral,
  kPhi3,
  kGemma,
  kDeepSeek,
  kDeepSeek3,
};

// A family plus what its template text fixes beyond the family.
struct ChatFormat {
  ChatFamily family = ChatFamily::kChatMl;
  // ChatML only: the system prompt the template writes when the
  // conversation starts without one ("" for none).
  std::string default_system_prompt;
};

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// One piece of rendered text. A marker is template text that stands for one
// special token (e.g. "<|im_start|>"): it becomes that token when the
// vocabulary has it, and text otherwise. Content is never a marker.
struct ChatPiece {
  std::string text;
  bool is_marker = false;
};

// The family's override name ("chatml", "qwen3", ...).
std::string_view ChatFamilyName(ChatFamily family);

// "chatml, qwen3, llama3, ..." for error messages.
std::string SupportedChatFamilies();

// The family for an override name. InvalidArgument listing the names when
// unknown (the message quotes at most 40 bytes of `name`).
absl::StatusOr<ChatFormat> ChatFormatFromName(std::string_view name);

// The format a Jinja template text describes. FailedPrecondition listing
// the supported families when it matches none (also for an empty text).
absl::StatusOr<ChatFormat> DetectChatFormat(std::string_view template_text);

// Where rendered messages go in a conversation.
struct ChatRenderPlace {
  // Rendering the conversation from its start (Qwen3's history rule and
  // system merging apply) rather than appending to one.
  bool whole_conversation = true;
  // The sequence already holds the conversation's start (BOS and, for
  // ChatML, any default system prompt); false for a whole conversation.
  bool conversation_has_start = false;
};

// OK for the roles a message may have ("system", "user", "assistant");
// otherwise InvalidArgument naming message `index` and the role (quoted, at
// most 40 bytes).
absl::Status CheckChatRole(size_t index, std::string_view role);

// Appends the pieces of `messages` to `out`. InvalidArgument (and `out`
// unchanged) for an unknown role (quoted, at most 40 bytes) or content
// that is not valid UTF-8, or a system message the family cannot place
// (llama2, mistral, gemma: only first, and followed by a user message).
absl::Status AppendChatMessages(const ChatFormat& format, std::span<const ChatMessage> messages,
                                const ChatRenderPlace& place, std::vector<ChatPiece>* out);

// Appends the generation prompt (the assistant turn's prefix; nothing for
// llama2/mistral, whose user turn ends with it). `enable_thinking` matters
// for qwen3 only.
void AppendChatGenerationPrompt(const ChatFormat& format, bool enable_thinking,
                                std::vector<ChatPiece>* out);

// The markers that end an assistant turn (generation stops there), e.g.
// "<|im_end|>"; EOS-style families list their EOS text.
std::vector<std::string> ChatEndOfTurnMarkers(ChatFamily family);

// The markers that open a turn (a message, or for llama2 a user-assistant
// exchange), e.g. "<|im_start|>": where a chat session's slide may cut
// (model/turn_slide_plan.h). Empty for deepseek, whose turns open with
// plain text ("User: ").
std::vector<std::string> ChatTurnStartMarkers(ChatFamily family);

// The template text that follows the end-of-turn marker of an assistant
// turn ("\n" for chatml, qwen3, phi3, gemma; "" otherwise): what a session
// appends after the model generated the end-of-turn token itself.
std::string_view ChatTextAfterEndOfTurn(ChatFamily family);

}  // namespace kvs

#endif  // KVSESSION_MODEL_CHAT_TEMPLATE_FAMILY_H_
