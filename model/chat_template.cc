// ChatTemplate: pieces from model/chat_template_family.h turned into text
// and token ids. See model/chat_template.h.
#include "model/chat_template.h"

#include <algorithm>
#include <utility>

namespace kvs {

ChatTemplate::ChatTemplate(ChatFormat format, const Tokenizer& tokenizer)
    : format_(std::move(format)), tokenizer_(&tokenizer) {
  for (const std::string& marker : ChatEndOfTurnMarkers(format_.family)) {
    const int32_t id = MarkerToken(marker);
    if (id >= 0) end_of_turn_ids_.push_back(id);
  }
  std::sort(end_of_turn_ids_.begin(), end_of_turn_ids_.end());
  for (const std::string& marker : ChatTurnStartMarkers(format_.family)) {
    const int32_t id = MarkerToken(marker);
    if (id >= 0) turn_start_ids_.push_back(id);
  }
  std::sort(turn_start_ids_.begin(), turn_start_ids_.end());
  // The start's tokens: a first message rendered with the start, minus the
  // same message without it (when the rest is the same tokens).
  const ChatMessage probe{"user", "x"};
  absl::StatusOr<RenderedChat> with = RenderAppended({&probe, 1}, false, Follows::kSpecialTokenOrStart);
  absl::StatusOr<RenderedChat> without = RenderAppended({&probe, 1}, true, Follows::kSpecialTokenOrStart);
  if (with.ok() && without.ok() && with->ids.size() > without->ids.size() &&
      std::equal(without->ids.begin(), without->ids.end(),
                 with->ids.end() - static_cast<ptrdiff_t>(without->ids.size())) &&
      !turn_start_ids_.empty() &&
      std::binary_search(turn_start_ids_.begin(), turn_start_ids_.end(), with->ids[0])) {
    conversation_start_tokens_ = static_cast<int>(with->ids.size() - without->ids.size());
  }
}

absl::StatusOr<ChatTemplate> ChatTemplate::Create(const GgufFile& gguf, const Tokenizer& tokenizer,
                                                  std::string_view family_name) {
  if (!family_name.empty()) {
    absl::StatusOr<ChatFormat> format = ChatFormatFromName(family_name);
    if (!format.ok()) return format.status();
    return ChatTemplate(*std::move(format), tokenizer);
  }
  absl::StatusOr<std::string_view> text = gguf.GetString("tokenizer.chat_template", "");
  if (!text.ok()) return text.status();
  absl::StatusOr<ChatFormat> format = DetectChatFormat(*text);
  if (!format.ok()) return format.status();
  return ChatTemplate(*std::move(format), tokenizer);
}

ChatTemplate ChatTemplate::ForFormat(ChatFormat format, const Tokenizer& tokenizer) {
  return ChatTemplate(std::move(format), tokenizer);
}

int32_t ChatTemplate::MarkerToken(std::string_view marker) const {
  const std::vector<int32_t> ids =
      tokenizer_->Encode(marker, /*add_special=*/false, /*parse_special=*/true);
  if (ids.size() != 1 || tokenizer_->token_text(ids[0]) != marker) return -1;
  const TokenType type = tokenizer_->token_type(ids[0]);
  return type == TokenType::kControl || type == TokenType::kUserDefined ? ids[0] : -1;
}

ChatTemplate::Follows ChatTemplate::FollowsOf(std::span<const int32_t> tokens, const Tokenizer& tokenizer) {
  if (tokens.empty()) return Follows::kSpecialTokenOrStart;
  if (tokenizer.StripsWhitespaceAfter(tokens.back())) return Follows::kWhitespaceSwallowingToken;
  const TokenType last = tokenizer.token_type(tokens.back());
  return last == TokenType::kControl || last == TokenType::kUserDefined ? Follows::kSpecialTokenOrStart
                                                                         : Follows::kText;
}

RenderedChat ChatTemplate::Tokenize(const std::vector<ChatPiece>& pieces, Follows follows) const {
  RenderedChat rendered;
  std::string run;  // text since the last marker token
  bool run_follows_text = follows == Follows::kText;
  // The whitespace after a marker that swallows it (Phi-3's) stays in the
  // text but gets no tokens, as the tokenizer splits the whole text.
  bool strip_run_start = follows == Follows::kWhitespaceSwallowingToken;
  const auto flush = [&] {
    if (strip_run_start) run.erase(0, run.size() - Tokenizer::AfterSwallowedWhitespace(run).size());
    if (run.empty()) return;
    // Plain text: never parse control tokens out of it.
    std::vector<int32_t> ids = run_follows_text
                                   ? tokenizer_->EncodeContinuation(run, /*parse_special=*/false)
                                   : tokenizer_->Encode(run, /*add_special=*/false,
                                                        /*parse_special=*/false);
    rendered.ids.insert(rendered.ids.end(), ids.begin(), ids.end());
    run.clear();
  };
  for (const ChatPiece& piece : pieces) {
    rendered.text += piece.text;
    const int32_t token = piece.is_marker ? MarkerToken(piece.text) : -1;
    if (token < 0) {
      run += piece.text;
      continue;
    }
    flush();
    rendered.ids.push_back(token);
    run_follows_text = false;
    strip_run_start = tokenizer_->StripsWhitespaceAfter(token);
  }
  flush();
  return rendered;
}

absl::StatusOr<RenderedChat> ChatTemplate::RenderConversation(
    std::span<const ChatMessage> messages, const ChatRenderOptions& options) const {
  std::vector<ChatPiece> pieces;
  const ChatRenderPlace place = {.whole_conversation = true, .conversation_has_start = false};
  if (absl::Status status = AppendChatMessages(format_, messages, place, &pieces); !status.ok()) {
    return status;
  }
  if (options.add_generation_prompt) {
    AppendChatGenerationPrompt(format_, options.enable_thinking, &pieces);
  }
  return Tokenize(pieces, Follows::kSpecialTokenOrStart);
}

absl::StatusOr<RenderedChat> ChatTemplate::RenderAppended(std::span<const ChatMessage> messages,
                                                          bool conversation_has_start, Follows follows) const {
  std::vector<ChatPiece> pieces;
  const ChatRenderPlace place = {.whole_conversation = false,
                                 .conversation_has_start = conversation_has_start};
  if (absl::Status status = AppendChatMessages(format_, messages, place, &pieces); !status.ok()) {
    return status;
  }
  // Without its start, the rendering begins the conversation.
  return Tokenize(pieces, conversation_has_start ? follows : Follows::kSpecialTokenOrStart);
}

RenderedChat ChatTemplate::RenderGenerationPrompt(const ChatRenderOptions& options, Follows follows) const {
  std::vector<ChatPiece> pieces;
  AppendChatGenerationPrompt(format_, options.enable_thinking, &pieces);
  return Tokenize(pieces, follows);
}

RenderedChat ChatTemplate::RenderAfterEndOfTurn() const {
  const std::string_view text = ChatTextAfterEndOfTurn(format_.family);
  if (text.empty()) return {};
  // It follows the end-of-turn token.
  const bool swallows = !end_of_turn_ids_.empty() && tokenizer_->StripsWhitespaceAfter(end_of_turn_ids_.front());
  return Tokenize({ChatPiece{std::string(text), false}},
                  swallows ? Follows::kWhitespaceSwallowingToken : Follows::kSpecialTokenOrStart);
}

RenderedChat ChatTemplate::RenderEndOfTurn() const {
  std::vector<ChatPiece> pieces;
  const std::vector<std::string> markers = ChatEndOfTurnMarkers(format_.family);
  if (!markers.empty()) pieces.push_back(ChatPiece{markers.front(), true});
  const std::string_view after = ChatTextAfterEndOfTurn(format_.family);
  if (!after.empty()) pieces.push_back(ChatPiece{std::string(after), false});
  // It follows the open turn's text.
  return Tokenize(pieces, Follows::kText);
}

}  // namespace kvs
