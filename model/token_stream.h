// TokenStream: what happens to each token a generation samples, in one
// place for the server's engine and the CLI's local `run`: the text it
// releases (whole UTF-8 characters only, stop strings held back and never
// released) and whether generation ends there, and why.
//
// Protocol: after sampling token `id` and appending it to the sequence,
// call Push(id, sequence_length); stream the returned text; stop when
// finished(). If generation ends for another reason (cancellation, an
// error), Finish() releases the text still held back (the stop strings'
// possible prefixes and an incomplete character as U+FFFD).
//
// A character split across two generations: a generation cut mid
// character (max_tokens, cancellation) may end with Finish(true), which
// leaves its incomplete bytes out; the next generation that continues the
// same sequence passes them as `carry` (TrailingIncompleteCharacter), and
// the token that completes the character releases it whole.
//
// End-of-generation tokens (the vocabulary's EOS/EOT, unless ignore_eos)
// end generation with kStopToken and release no text; they stay in the
// sequence, so a conversation continues with exactly the tokens the model
// produced.
//
// Not thread-safe; one per generation. Borrows the tokenizer.
#ifndef KVSESSION_MODEL_TOKEN_STREAM_H_
#define KVSESSION_MODEL_TOKEN_STREAM_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/stop_matcher.h"
#include "model/tokenizer.h"

namespace kvs {

enum class FinishReason { kNone, kStopToken, kStopSequence, kLength, kCancelled, kError };

// "stop_token", "stop_sequence", "length", "cancelled", "error", or "" for kNone.
const char* FinishReasonName(FinishReason reason);

struct TokenStreamOptions {
  int max_tokens = 128;            // generated tokens, then kLength
  int max_context = 0;             // sequence length, then kLength
  std::vector<std::string> stop;   // stop strings (kStopSequence)
  bool ignore_eos = false;         // end-of-generation tokens are ordinary
  std::string carry;               // an incomplete character the sequence ends with
};

// The bytes of the incomplete UTF-8 character that `tokens` end with (0 to
// 3 bytes; "" when they end with a whole character or a special token).
std::string TrailingIncompleteCharacter(const Tokenizer& tokenizer, std::span<const int32_t> tokens);

class TokenStream {
 public:
  TokenStream(const Tokenizer* tokenizer, TokenStreamOptions options);

  // Token `id` was sampled and appended; the sequence now holds
  // `sequence_length` tokens. Returns the text that may be sent now.
  std::string Push(int32_t id, int sequence_length);
  // The text still held back; call once when generation ends. With
  // `keep_incomplete_character`, an incomplete last character is left out
  // (the next generation may complete it) instead of released as U+FFFD.
  std::string Finish(bool keep_incomplete_character = false);

  bool finished() const { return reason_ != FinishReason::kNone; }
  FinishReason reason() const { return reason_; }
  int generated() const { return generated_; }
  // Whether `id` ends generation (an end-of-generation token and not ignore_eos).
  bool IsStopToken(int32_t id) const;

 private:
  const Tokenizer* const tokenizer_;
  const TokenStreamOptions options_;
  Utf8StreamDecoder decoder_;
  StopMatcher stop_;
  FinishReason reason_ = FinishReason::kNone;
  int generated_ = 0;
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_TOKEN_STREAM_H_
