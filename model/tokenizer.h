// Tokenizer: text <-> token ids from the vocabulary stored in a GGUF file.
//
// Two vocabulary families, chosen by `tokenizer.ggml.model`:
//   "llama" -> SpmTokenizer (SentencePiece-style: scores, "▁" for spaces,
//              the leading-space rule, byte fallback <0xNN>);
//   "gpt2"  -> BpeTokenizer (byte-level BPE: ranked merges, a pre-tokenizer
//              regex chosen by `tokenizer.ggml.pre`).
// Results match llama.cpp's tokenizer for the same GGUF (the test vectors in
// ../shared/vocab are the acceptance check).
//
// Contract: Encode() takes valid UTF-8 (callers validate user input with
// IsValidUtf8 first and report INVALID_ARGUMENT otherwise). Piece() gives the
// raw bytes a token stands for in generated text; a piece may be only part
// of a UTF-8 character (byte tokens), which is why streaming goes through
// Utf8StreamDecoder.
//
// Ownership: a Tokenizer copies everything it needs out of the GgufFile; it
// does not keep a reference to it. Immutable after construction, so it is
// safe to share between threads.
#ifndef KVSESSION_MODEL_TOKENIZER_H_
#define KVSESSION_MODEL_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/gguf_file.h"

namespace kvs {

// Token attribute from `tokenizer.ggml.token_type` (llama.cpp numbering).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

class Tokenizer {
 public:
  // Builds the tokenizer the GGUF's metadata describes. InvalidArgument for
  // an unknown `tokenizer.ggml.model` or `tokenizer.ggml.pre`, or an
  // inconsistent vocabulary (e.g. scores and tokens of different lengths,
  // special token ids out of range).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& gguf);

  virtual ~Tokenizer() = default;

  // Token ids for `text`. With `add_special`, BOS and/or EOS are added as the
  // vocabulary says (`tokenizer.ggml.add_bos_token` / `add_eos_token`, else
  // the family's default). With `parse_special`, the text of control tokens
  // (e.g. "<|im_start|>") becomes those tokens; otherwise it is plain text.
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_special,
                                      bool parse_special = false) const = 0;

  // The bytes token `id` contributes to generated text: "▁" becomes " "
  // (SPM), byte tokens become their byte, byte-level BPE symbols map back to
  // bytes, control tokens contribute nothing. Out-of-range ids give "".
  virtual std::string Piece(int32_t id) const = 0;

  // Concatenated pieces (may end in an incomplete UTF-8 sequence).
  std::string Decode(std::span<const int32_t> ids) const;

  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  std::string_view token_text(int32_t id) const;  // the raw vocabulary string
  TokenType token_type(int32_t id) const;
  int32_t bos_id() const { return bos_id_; }  // -1 when the vocabulary has none
  int32_t eos_id() const { return eos_id_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  // True for tokens that end generation: EOS, EOT/EOM and the control tokens
  // llama.cpp treats as end-of-generation (e.g. "<|im_end|>", "<|end|>",
  // "<|eot_id|>", "<|endoftext|>").
  bool IsEndOfGeneration(int32_t id) const;
  const std::vector<int32_t>& end_of_generation_ids() const { return eog_ids_; }
  // "llama" or "gpt2".
  virtual std::string_view model_name() const = 0;

 protected:
  Tokenizer() = default;

  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
  std::vector<int32_t> eog_ids_;  // sorted
};

// True when `s` is well-formed UTF-8 (no overlongs, surrogates, or code
// points above U+10FFFF).
bool IsValidUtf8(std::string_view s);

// Turns a stream of token pieces into text that never contains a broken
// UTF-8 sequence: bytes that end inside a multi-byte character are held
// back until the character completes. Invalid bytes (that can never become a
// character) are emitted as U+FFFD. One decoder per stream; not thread-safe.
class Utf8StreamDecoder {
 public:
  // Appends `bytes` and returns the text that is now complete.
  std::string Push(std::string_view bytes);
  // Returns what is held back (as U+FFFD if incomplete) and resets.
  std::string Finish();
  // Bytes currently held back (0..3).
  size_t pending() const { return pending_.size(); }

 private:
  std::string pending_;
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_TOKENIZER_H_
