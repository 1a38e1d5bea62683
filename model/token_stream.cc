#include "model/token_stream.h"

namespace kvs {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStopToken: return "stop_token";
    case FinishReason::kStopSequence: return "stop_sequence";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
    case FinishReason::kNone: break;
  }
  return "";
}

TokenStream::TokenStream(const Tokenizer* tokenizer, TokenStreamOptions options)
    : tokenizer_(tokenizer), options_(std::move(options)), stop_(options_.stop) {
  // Held, never released by itself: the carry is an incomplete character.
  (void)decoder_.Push(options_.carry);
}

std::string TrailingIncompleteCharacter(const Tokenizer& tokenizer, std::span<const int32_t> tokens) {
  // An incomplete character is at most 3 bytes, so in at most the last 3
  // tokens; a special token ends any character before it.
  size_t first = tokens.size();
  while (first > 0 && tokens.size() - first < 3) {
    const TokenType type = tokenizer.token_type(tokens[first - 1]);
    if (type == TokenType::kControl || type == TokenType::kUserDefined) break;
    --first;
  }
  Utf8StreamDecoder decoder;
  for (size_t i = first; i < tokens.size(); ++i) (void)decoder.Push(tokenizer.Piece(tokens[i]));
  return decoder.pending_bytes();
}

bool TokenStream::IsStopToken(int32_t id) const {
  return !options_.ignore_eos && tokenizer_->IsEndOfGeneration(id);
}

std::string TokenStream::Push(int32_t id, int sequence_length) {
  ++generated_;
  const bool eog = IsStopToken(id);
  std::string text = eog ? std::string() : stop_.Push(decoder_.Push(tokenizer_->Piece(id)));
  if (eog) {
    reason_ = FinishReason::kStopToken;
  } else if (stop_.stopped()) {
    reason_ = FinishReason::kStopSequence;
  } else if (generated_ >= options_.max_tokens || sequence_length >= options_.max_context) {
    reason_ = FinishReason::kLength;
  }
  return text;
}

std::string TokenStream::Finish(bool keep_incomplete_character) {
  if (stop_.stopped()) return std::string();
  std::string text = keep_incomplete_character ? std::string() : stop_.Push(decoder_.Finish());
  text += stop_.Finish();
  return text;
}

}  // namespace kvs
