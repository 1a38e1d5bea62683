// Chat template families: detection, names and each family's format. See
// model/chat_template_family.h.
#include "model/chat_template_family.h"

#include <algorithm>
#include <array>
#include <initializer_list>

#include "model/tokenizer.h"
#include "model/utf8.h"

namespace kvs {
namespace {

// Concatenation of std::string_views (Debian's Abseil has its own
// string_view, so absl::StrCat does not take std::string_view).
std::string Cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view part : parts) out.append(part);
  return out;
}

struct NamedFamily {
  std::string_view name;
  ChatFamily family;
};

constexpr std::array<NamedFamily, 9> kFamilies = {{
    {"chatml", ChatFamily::kChatMl},
    {"qwen3", ChatFamily::kQwen3},
    {"llama3", ChatFamily::kLlama3},
    {"llama2", ChatFamily::kLlama2},
    {"mistral", ChatFamily::kMistral},
    {"phi3", ChatFamily::kPhi3},
    {"gemma", ChatFamily::kGemma},
    {"deepseek", ChatFamily::kDeepSeek},
    {"deepseek3", ChatFamily::kDeepSeek3},
}};

// At most `limit` bytes of untrusted text for an error message, cut at a
// character boundary.
std::string Quoted(std::string_view text, size_t limit = 40) {
  if (text.size() <= limit) return Cat({"'", text, "'"});
  size_t end = limit;
  while (end > 0 && (static_cast<uint8_t>(text[end]) & 0xC0) == 0x80) --end;
  return Cat({"'", text.substr(0, end), "...'"});
}

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Python's str.isspace() for one code point (what Jinja's `trim` strips).
bool IsPythonWhiteSpace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Jinja's `trim` / Python's strip(): no leading or trailing whitespace.
// `text` is valid UTF-8.
std::string_view Trim(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t next = begin;
    if (!IsPythonWhiteSpace(utf8::DecodeValid(text, &next))) break;
    begin = next;
  }
  size_t end = begin;  // one past the last non-space character
  for (size_t pos = begin; pos < text.size();) {
    if (!IsPythonWhiteSpace(utf8::DecodeValid(text, &pos))) end = pos;
  }
  return text.substr(begin, end - begin);
}

std::string_view StripNewlinesLeft(std::string_view text) {
  while (!text.empty() && text.front() == '\n') text.remove_prefix(1);
  return text;
}

std::string_view StripNewlinesRight(std::string_view text) {
  while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  return text;
}

// Builds a piece list; consecutive text pieces stay separate (the caller
// joins them into one run between markers).
class Pieces {
 public:
  explicit Pieces(std::vector<ChatPiece>* out) : out_(out) {}
  Pieces& Marker(std::string_view text) {
    out_->push_back({std::string(text), true});
    return *this;
  }
  Pieces& Text(std::string_view text) {
    if (!text.empty()) out_->push_back({std::string(text), false});
    return *this;
  }

 private:
  std::vector<ChatPiece>* out_;
};

// Qwen3's split of an assistant message into reasoning and answer (the
// template's rule when the message has no separate reasoning field).
struct ThinkingSplit {
  std::string_view reasoning;
  std::string_view content;
};

ThinkingSplit SplitThinking(std::string_view content) {
  constexpr std::string_view kClose = "</think>";
  const size_t first_close = content.find(kClose);
  if (first_close == std::string_view::npos) return {{}, content};
  const size_t last_close = content.rfind(kClose);
  std::string_view answer = StripNewlinesLeft(content.substr(last_close + kClose.size()));
  std::string_view before = StripNewlinesRight(content.substr(0, first_close));
  const size_t open = before.rfind("<think>");
  if (open != std::string_view::npos) before.remove_prefix(open + std::string_view("<think>").size());
  return {StripNewlinesLeft(before), answer};
}

// The index of the last user message: Qwen3 keeps the reasoning of
// assistant turns after it only. (The template skips user messages that are
// tool responses; this engine has no tool role.)
size_t LastUserIndex(std::span<const ChatMessage> messages) {
  for (size_t i = messages.size(); i > 0; --i) {
    if (messages[i - 1].role == "user") return i - 1;
  }
  return messages.empty() ? 0 : messages.size() - 1;
}

void AppendChatMl(const ChatFormat& format, std::span<const ChatMessage> messages,
                  const ChatRenderPlace& place, Pieces pieces) {
  const bool starts = !place.conversation_has_start;
  if (starts && !format.default_system_prompt.empty() &&
      (messages.empty() || messages[0].role != "system")) {
    pieces.Marker("<|im_start|>").Text("system\n").Text(format.default_system_prompt);
    pieces.Marker("<|im_end|>").Text("\n");
  }
  const bool qwen3 = format.family == ChatFamily::kQwen3;
  const bool qwen3_history = qwen3 && place.whole_conversation;
  const size_t last_user = LastUserIndex(messages);
  const bool has_user = std::any_of(messages.begin(), messages.end(),
                                    [](const ChatMessage& m) { return m.role == "user"; });
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    pieces.Marker("<|im_start|>").Text(message.role).Text("\n");
    if (message.role == "assistant" && qwen3 && !qwen3_history && has_user && i < last_user) {
      // Appended: an assistant turn before a later user turn of the same
      // call loses its reasoning, as the whole conversation renders it
      // (a client that sends its history in one call gets those tokens).
      pieces.Text(SplitThinking(message.content).content);
    } else if (message.role == "assistant" && qwen3_history) {
      const ThinkingSplit split = SplitThinking(message.content);
      const bool last = i + 1 == messages.size();
      if (i > last_user && (last || !split.reasoning.empty())) {
        pieces.Marker("<think>").Text("\n").Text(StripNewlinesRight(StripNewlinesLeft(split.reasoning)));
        pieces.Text("\n").Marker("</think>").Text("\n\n").Text(StripNewlinesLeft(split.content));
      } else {
        pieces.Text(split.content);
      }
    } else {
      pieces.Text(message.content);
    }
    pieces.Marker("<|im_end|>").Text("\n");
  }
}

void AppendLlama3(std::span<const ChatMessage> messages, const ChatRenderPlace& place,
                  Pieces pieces) {
  if (!place.conversation_has_start && !messages.empty()) pieces.Marker("<|begin_of_text|>");
  for (const ChatMessage& message : messages) {
    pieces.Marker("<|start_header_id|>").Text(message.role).Marker("<|end_header_id|>");
    pieces.Text("\n\n").Text(Trim(message.content)).Marker("<|eot_id|>");
  }
}

// Llama 2, Mistral and Gemma have no system turn: the system text goes in
// front of the first user message. Returns that prefix ("" for none) and
// drops the system message from `messages`; InvalidArgument when a system
// message is elsewhere or not followed by a user message.
absl::StatusOr<std::string> TakeSystemPrefix(ChatFamily family,
                                             std::span<const ChatMessage>* messages,
                                             const ChatRenderPlace& place) {
  for (size_t i = 0; i < messages->size(); ++i) {
    if ((*messages)[i].role != "system") continue;
    const bool placeable = i == 0 && !place.conversation_has_start && messages->size() > 1 &&
                           (*messages)[1].role == "user";
    if (!placeable) {
      return absl::InvalidArgumentError(Cat({
          "the ", ChatFamilyName(family),
          " chat format has no system turn: a system message must be the first message of the "
          "conversation, followed by a user message"}));
    }
  }
  if (messages->empty() || (*messages)[0].role != "system") return std::string();
  const std::string_view system = (*messages)[0].content;
  *messages = messages->subspan(1);
  switch (family) {
    case ChatFamily::kLlama2:
      return Cat({"<<SYS>>\n", system, "\n<</SYS>>\n\n"});
    default:
      return Cat({system, "\n\n"});
  }
}

void AppendLlama2(std::span<const ChatMessage> messages, std::string_view system_prefix,
                  Pieces pieces) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    const std::string content =
        i == 0 ? Cat({system_prefix, message.content}) : message.content;
    if (message.role == "user") {
      pieces.Marker("<s>").Text("[INST] ").Text(Trim(content)).Text(" [/INST]");
    } else {
      pieces.Text(" ").Text(Trim(content)).Text(" ").Marker("</s>");
    }
  }
}

void AppendMistral(std::span<const ChatMessage> messages, std::string_view system_prefix,
                   const ChatRenderPlace& place, Pieces pieces) {
  if (!place.conversation_has_start && !messages.empty()) pieces.Marker("<s>");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    if (message.role == "user") {
      pieces.Marker("[INST]").Text(" ").Text(i == 0 ? system_prefix : "").Text(message.content);
      pieces.Text(" ").Marker("[/INST]");
    } else {
      pieces.Text(message.content).Marker("</s>");
    }
  }
}

void AppendPhi3(std::span<const ChatMessage> messages, Pieces pieces) {
  for (const ChatMessage& message : messages) {
    pieces.Marker(Cat({"<|", message.role, "|>"})).Text("\n").Text(message.content);
    pieces.Marker("<|end|>").Text("\n");
  }
}

void AppendGemma(std::span<const ChatMessage> messages, std::string_view system_prefix,
                 const ChatRenderPlace& place, Pieces pieces) {
  if (!place.conversation_has_start && !messages.empty()) pieces.Marker("<bos>");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    pieces.Marker("<start_of_turn>").Text(message.role == "assistant" ? "model" : message.role);
    pieces.Text("\n").Text(i == 0 ? system_prefix : "").Text(Trim(message.content));
    pieces.Marker("<end_of_turn>").Text("\n");
  }
}

void AppendDeepSeek(std::span<const ChatMessage> messages, const ChatRenderPlace& place,
                    Pieces pieces) {
  if (!place.conversation_has_start && !messages.empty()) {
    pieces.Marker("<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>");
  }
  for (const ChatMessage& message : messages) {
    if (message.role == "system") {
      pieces.Text(message.content).Text("\n\n");
    } else if (message.role == "user") {
      pieces.Text("User: ").Text(message.content).Text("\n\n");
    } else {
      pieces.Text("Assistant: ").Text(message.content);
      pieces.Marker("<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>");
    }
  }
}

void AppendDeepSeek3(std::span<const ChatMessage> messages, const ChatRenderPlace& place,
                     Pieces pieces) {
  if (!place.conversation_has_start && !messages.empty()) {
    pieces.Marker("<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>");
  }
  for (const ChatMessage& message : messages) {
    if (message.role == "system") {
      pieces.Text(message.content);
    } else if (message.role == "user") {
      pieces.Marker("<\xEF\xBD\x9CUser\xEF\xBD\x9C>").Text(message.content);
    } else {
      pieces.Marker("<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>").Text(message.content);
      pieces.Marker("<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>");
    }
  }
}

// The default system prompt a ChatML template writes, e.g. Qwen2.5's
// '<|im_start|>system\nYou are Qwen, ...<|im_end|>\n': the literal text
// after "system\n" (as written in the template source, a backslash and an
// "n") up to "<|im_end|>", when it starts with "You are".
std::string ChatMlDefaultSystemPrompt(std::string_view template_text) {
  constexpr std::string_view kOpen = "<|im_start|>system\\n";
  for (size_t pos = template_text.find(kOpen); pos != std::string_view::npos;
       pos = template_text.find(kOpen, pos + 1)) {
    const std::string_view rest = template_text.substr(pos + kOpen.size());
    const size_t end = rest.find("<|im_end|>");
    if (rest.substr(0, 7) == "You are" && end != std::string_view::npos) {
      return std::string(rest.substr(0, end));
    }
  }
  return "";
}

}  // namespace

std::string_view ChatFamilyName(ChatFamily family) {
  for (const NamedFamily& entry : kFamilies) {
    if (entry.family == family) return entry.name;
  }
  return "unknown";
}

std::string SupportedChatFamilies() {
  std::string names;
  for (const NamedFamily& entry : kFamilies) {
    names += Cat({names.empty() ? "" : ", ", entry.name});
  }
  return names;
}

absl::StatusOr<ChatFormat> ChatFormatFromName(std::string_view name) {
  for (const NamedFamily& entry : kFamilies) {
    if (entry.name == name) return ChatFormat{entry.family, ""};
  }
  return absl::InvalidArgumentError(Cat({"unknown chat template ", Quoted(name),
                                                 "; supported: ", SupportedChatFamilies()}));
}

absl::StatusOr<ChatFormat> DetectChatFormat(std::string_view t) {
  if (Contains(t, "<|im_start|>")) {
    if (Contains(t, "<think>")) return ChatFormat{ChatFamily::kQwen3, ""};
    return ChatFormat{ChatFamily::kChatMl, ChatMlDefaultSystemPrompt(t)};
  }
  if (Contains(t, "<|start_header_id|>") && Contains(t, "<|end_header_id|>")) {
    return ChatFormat{ChatFamily::kLlama3, ""};
  }
  if (Contains(t, "[INST]")) {
    return ChatFormat{Contains(t, "<<SYS>>") ? ChatFamily::kLlama2 : ChatFamily::kMistral, ""};
  }
  if (Contains(t, "<|assistant|>") && Contains(t, "<|end|>")) {
    return ChatFormat{ChatFamily::kPhi3, ""};
  }
  if (Contains(t, "<start_of_turn>")) return ChatFormat{ChatFamily::kGemma, ""};
  if (Contains(t, "<\xEF\xBD\x9CUser\xEF\xBD\x9C>") &&
      Contains(t, "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>")) {
    return ChatFormat{ChatFamily::kDeepSeek3, ""};
  }
  if (Contains(t, "'User: '") && Contains(t, "'Assistant:")) {
    return ChatFormat{ChatFamily::kDeepSeek, ""};
  }
  return absl::FailedPreconditionError(
      Cat({t.empty() ? "the model has no chat template" : "unrecognised chat template",
                   "; supported families: ", SupportedChatFamilies(),
                   " (choose one by name to override)"}));
}

absl::Status CheckChatRole(size_t index, std::string_view role) {
  if (role == "system" || role == "user" || role == "assistant") return absl::OkStatus();
  return absl::InvalidArgumentError(Cat({"message ", std::to_string(index), " has role ", Quoted(role),
                                         "; supported roles: system, user, assistant"}));
}

absl::Status AppendChatMessages(const ChatFormat& format, std::span<const ChatMessage> messages,
                                const ChatRenderPlace& place, std::vector<ChatPiece>* out) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    if (absl::Status st = CheckChatRole(i, message.role); !st.ok()) return st;
    if (!IsValidUtf8(message.content)) {
      return absl::InvalidArgumentError(
          Cat({"message ", std::to_string(i), " content is not valid UTF-8"}));
    }
  }
  std::vector<ChatPiece> pieces;
  switch (format.family) {
    case ChatFamily::kChatMl:
    case ChatFamily::kQwen3:
      AppendChatMl(format, messages, place, Pieces(&pieces));
      break;
    case ChatFamily::kLlama3:
      AppendLlama3(messages, place, Pieces(&pieces));
      break;
    case ChatFamily::kPhi3:
      AppendPhi3(messages, Pieces(&pieces));
      break;
    case ChatFamily::kDeepSeek:
      AppendDeepSeek(messages, place, Pieces(&pieces));
      break;
    case ChatFamily::kDeepSeek3:
      AppendDeepSeek3(messages, place, Pieces(&pieces));
      break;
    case ChatFamily::kLlama2:
    case ChatFamily::kMistral:
    case ChatFamily::kGemma: {
      absl::StatusOr<std::string> prefix = TakeSystemPrefix(format.family, &messages, place);
      if (!prefix.ok()) return prefix.status();
      if (format.family == ChatFamily::kLlama2) {
        AppendLlama2(messages, *prefix, Pieces(&pieces));
      } else if (format.family == ChatFamily::kMistral) {
        AppendMistral(messages, *prefix, place, Pieces(&pieces));
      } else {
        AppendGemma(messages, *prefix, place, Pieces(&pieces));
      }
      break;
    }
  }
  out->insert(out->end(), pieces.begin(), pieces.end());
  return absl::OkStatus();
}

void AppendChatGenerationPrompt(const ChatFormat& format, bool enable_thinking,
                                std::vector<ChatPiece>* out) {
  Pieces pieces(out);
  switch (format.family) {
    case ChatFamily::kChatMl:
      pieces.Marker("<|im_start|>").Text("assistant\n");
      break;
    case ChatFamily::kQwen3:
      pieces.Marker("<|im_start|>").Text("assistant\n");
      if (!enable_thinking) pieces.Marker("<think>").Text("\n\n").Marker("</think>").Text("\n\n");
      break;
    case ChatFamily::kLlama3:
      pieces.Marker("<|start_header_id|>").Text("assistant").Marker("<|end_header_id|>");
      pieces.Text("\n\n");
      break;
    case ChatFamily::kLlama2:
    case ChatFamily::kMistral:
      break;
    case ChatFamily::kPhi3:
      pieces.Marker("<|assistant|>").Text("\n");
      break;
    case ChatFamily::kGemma:
      pieces.Marker("<start_of_turn>").Text("model\n");
      break;
    case ChatFamily::kDeepSeek:
      pieces.Text("Assistant:");
      break;
    case ChatFamily::kDeepSeek3:
      pieces.Marker("<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>");
      break;
  }
}

std::vector<std::string> ChatEndOfTurnMarkers(ChatFamily family) {
  switch (family) {
    case ChatFamily::kChatMl:
    case ChatFamily::kQwen3:
      return {"<|im_end|>"};
    case ChatFamily::kLlama3:
      return {"<|eot_id|>"};
    case ChatFamily::kLlama2:
    case ChatFamily::kMistral:
      return {"</s>"};
    case ChatFamily::kPhi3:
      return {"<|end|>"};
    case ChatFamily::kGemma:
      return {"<end_of_turn>"};
    case ChatFamily::kDeepSeek:
    case ChatFamily::kDeepSeek3:
      return {"<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"};
  }
  return {};
}

std::vector<std::string> ChatTurnStartMarkers(ChatFamily family) {
  switch (family) {
    case ChatFamily::kChatMl:
    case ChatFamily::kQwen3:
      return {"<|im_start|>"};
    case ChatFamily::kLlama3:
      return {"<|start_header_id|>"};
    case ChatFamily::kLlama2:
      return {"<s>"};  // each exchange: <s>[INST] ... [/INST] ... </s>
    case ChatFamily::kMistral:
      return {"[INST]"};
    case ChatFamily::kPhi3:
      return {"<|system|>", "<|user|>", "<|assistant|>"};
    case ChatFamily::kGemma:
      return {"<start_of_turn>"};
    case ChatFamily::kDeepSeek:
      return {};
    case ChatFamily::kDeepSeek3:
      return {"<\xEF\xBD\x9CUser\xEF\xBD\x9C>", "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>"};
  }
  return {};
}

std::string_view ChatTextAfterEndOfTurn(ChatFamily family) {
  switch (family) {
    case ChatFamily::kChatMl:
    case ChatFamily::kQwen3:
    case ChatFamily::kPhi3:
    case ChatFamily::kGemma:
      return "\n";
    default:
      return "";
  }
}

}  // namespace kvs
