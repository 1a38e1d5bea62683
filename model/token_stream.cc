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
    : tokenizer_(tokenizer), options_(std::move(options)), stop_(options_.stop) {}

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

std::string TokenStream::Finish() {
  if (stop_.stopped()) return std::string();
  std::string text = stop_.Push(decoder_.Finish());
  text += stop_.Finish();
  return text;
}

}  // namespace kvs
