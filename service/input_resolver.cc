#include "service/input_resolver.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kvs {
namespace v1 = kvsession::v1;

absl::StatusOr<InputResolver> InputResolver::Create(const GgufFile& gguf, const Tokenizer& tokenizer,
                                                    std::string_view chat_template_family,
                                                    InputLimits limits) {
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::Create(gguf, tokenizer, chat_template_family);
  if (!chat.ok() && !chat_template_family.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--chat-template: ", chat.status().message()));
  }
  return InputResolver(tokenizer, std::move(chat), limits);
}

std::string_view InputResolver::chat_family() const {
  return chat_.ok() ? ChatFamilyName(chat_->format().family) : std::string_view();
}

absl::Status InputResolver::NoTemplate(std::string_view what) const {
  return absl::FailedPreconditionError(absl::StrCat(
      std::string(what), " need a chat template, and this model has none the server recognises (",
      chat_.status().message(), "); start the server with --chat-template NAME, one of: ",
      SupportedChatFamilies()));
}

absl::StatusOr<std::vector<int32_t>> InputResolver::ResolveText(
    const v1::Input& input, std::span<const int32_t> session_tokens) const {
  if (input.has_tokens()) {
    if (input.tokens().ids_size() > limits_.max_context) {
      return absl::OutOfRangeError(absl::StrCat("input of ", input.tokens().ids_size(),
                                                " tokens exceeds the context limit of ",
                                                limits_.max_context, " tokens"));
    }
    return std::vector<int32_t>(input.tokens().ids().begin(), input.tokens().ids().end());
  }
  const std::string& text = input.text();
  if (text.size() > static_cast<size_t>(limits_.max_input_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("input of ", text.size(),
                                                   " bytes exceeds the limit of ",
                                                   limits_.max_input_bytes, " bytes"));
  }
  if (!IsValidUtf8(text)) return absl::InvalidArgumentError("input text is not valid UTF-8");
  // At the start or after a special token (BOS, EOS, a chat marker) the
  // text begins a run (SentencePiece's leading space, as the whole text
  // would tokenize); after ordinary text it continues it.
  // After a token that swallows the whitespace after it (Phi-3's markers)
  // that whitespace gets no tokens either.
  const Tokenizer& tok = *tokenizer_;
  switch (ChatTemplate::FollowsOf(session_tokens, tok)) {
    case ChatTemplate::Follows::kText:
      return tok.EncodeContinuation(text, input.parse_special());
    case ChatTemplate::Follows::kWhitespaceSwallowingToken: {
      const std::string_view kept = Tokenizer::AfterSwallowedWhitespace(text);
      if (kept.empty()) return std::vector<int32_t>();
      return tok.Encode(kept, /*add_special=*/false, input.parse_special());
    }
    case ChatTemplate::Follows::kSpecialTokenOrStart:
      break;
  }
  return tok.Encode(text, /*add_special=*/false, input.parse_special());
}

absl::Status InputResolver::AppendMessages(const v1::ChatMessages& messages,
                                           std::span<const int32_t> session_tokens,
                                           std::vector<int32_t>* ids, ChatState* chat) const {
  if (!chat_.ok()) return NoTemplate("chat messages");
  if (messages.messages().empty()) return absl::InvalidArgumentError("messages is empty");
  // Each message renders at least one token: more than the context never
  // fits, and is refused before anything is copied or rendered.
  if (messages.messages_size() > limits_.max_context) {
    return absl::OutOfRangeError(absl::StrCat(messages.messages_size(), " messages exceed the context limit of ",
                                              limits_.max_context, " tokens (each renders at least one)"));
  }
  std::vector<ChatMessage> list;
  list.reserve(messages.messages_size());
  size_t bytes = 0;
  for (int i = 0; i < messages.messages_size(); ++i) {
    const v1::ChatMessage& m = messages.messages(i);
    // Checked here, before the message is copied: a known role also makes
    // each message count at least 4 bytes against the limit.
    if (absl::Status st = CheckChatRole(static_cast<size_t>(i), m.role()); !st.ok()) return st;
    bytes += m.content().size() + m.role().size();
    if (bytes > static_cast<size_t>(limits_.max_input_bytes)) {
      return absl::InvalidArgumentError(absl::StrCat("messages exceed the input limit of ",
                                                     limits_.max_input_bytes, " bytes"));
    }
    if (!IsValidUtf8(m.content())) {
      return absl::InvalidArgumentError(absl::StrCat("message ", i, ": content is not valid UTF-8"));
    }
    list.push_back(ChatMessage{m.role(), m.content()});
  }
  std::vector<int32_t> out = TurnCloser(session_tokens, *chat);
  const ChatTemplate::Follows follows =
      ChatTemplate::FollowsOf(out.empty() ? session_tokens : std::span<const int32_t>(out), *tokenizer_);
  absl::StatusOr<RenderedChat> rendered = chat_->RenderAppended(list, chat->started, follows);
  if (!rendered.ok()) return rendered.status();
  std::span<const int32_t> r = rendered->ids;
  // A template that writes the BOS itself (llama3, gemma, ...) after the
  // session's own BOS: keep one.
  const int32_t bos = tokenizer_->bos_id();
  if (!chat->started && out.empty() && !r.empty() && bos >= 0 && r[0] == bos &&
      session_tokens.size() == 1 && session_tokens[0] == bos) {
    r = r.subspan(1);
  }
  out.insert(out.end(), r.begin(), r.end());
  ids->insert(ids->end(), out.begin(), out.end());
  *chat = ChatState{.started = true, .turn_open = false};
  return absl::OkStatus();
}

std::vector<int32_t> InputResolver::TurnCloser(std::span<const int32_t> tokens, const ChatState& chat) const {
  if (chat.turn_open) return chat_->RenderEndOfTurn().ids;
  const std::vector<int32_t>& eot = chat_->end_of_turn_ids();
  if (!chat.started || tokens.empty() || !std::binary_search(eot.begin(), eot.end(), tokens.back())) return {};
  return chat_->RenderAfterEndOfTurn().ids;
}

absl::StatusOr<ResolvedInput> InputResolver::Resolve(const v1::Input* input,
                                                     std::span<const int32_t> session_tokens,
                                                     const ChatState& chat,
                                                     const GenerationPromptChoice* generate) const {
  ResolvedInput out;
  ChatState state = chat;
  if (input != nullptr) {
    if (input->has_messages()) {
      if (absl::Status s = AppendMessages(input->messages(), session_tokens, &out.ids, &state); !s.ok()) {
        return s;
      }
    } else {
      absl::StatusOr<std::vector<int32_t>> ids = ResolveText(*input, session_tokens);
      if (!ids.ok()) return ids.status();
      out.ids = *std::move(ids);
    }
  }
  if (generate != nullptr) {
    const bool add = generate->add.value_or(state.started && !state.turn_open);
    if (add) {
      if (!chat_.ok()) return NoTemplate("add_generation_prompt");
      // After this call's own input, only an open turn is closed: rendered
      // messages end their turns themselves, and text or token input is
      // the client's to end.
      const std::vector<int32_t> close =
          TurnCloser(out.ids.empty() ? session_tokens : std::span<const int32_t>(), state);
      out.ids.insert(out.ids.end(), close.begin(), close.end());
      const ChatTemplate::Follows follows = ChatTemplate::FollowsOf(
          out.ids.empty() ? session_tokens : std::span<const int32_t>(out.ids), *tokenizer_);
      const std::vector<int32_t> prompt =
          chat_->RenderGenerationPrompt({.add_generation_prompt = true,
                                         .enable_thinking = generate->enable_thinking},
                                        follows)
              .ids;
      out.ids.insert(out.ids.end(), prompt.begin(), prompt.end());
      state = ChatState{.started = true, .turn_open = true};
    }
  }
  if (state.started) {
    ChatJob job;
    job.after_input = state;
    if (chat_.ok()) {
      job.end_of_turn_ids = chat_->end_of_turn_ids();
      job.after_end_of_turn = chat_->RenderAfterEndOfTurn().ids;
      job.turn_start_ids = chat_->turn_start_ids();
      job.conversation_start_tokens = chat_->conversation_start_tokens();
    }
    out.chat = std::move(job);
  }
  return out;
}

std::string InputResolver::Decode(std::span<const int32_t> ids, bool include_special) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || id >= tokenizer_->vocab_size()) continue;
    if (include_special && tokenizer_->token_type(id) == TokenType::kControl) {
      bytes += tokenizer_->token_text(id);
    } else {
      bytes += tokenizer_->Piece(id);
    }
  }
  Utf8StreamDecoder decoder;
  std::string text = decoder.Push(bytes);
  text += decoder.Finish();
  return text;
}

}  // namespace kvs
