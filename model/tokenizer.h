// Tokenizer: text <-> token ids from the vocabulary stored in a GGUF file.
//
// Two vocabulary families, chosen by `tokenizer.ggml.model`:
//   "llama" -> SpmTokenizer (SentencePiece-style: scores, "▁" for spaces,
//              the leading-space rule, byte fallback <0xNN>);
//   "gpt2"  -> BpeTokenizer (byte-level BPE: ranked merges, a pre-tokenizer
//              regex chosen by `tokenizer.ggml.pre`).
// Results match llama.cpp's tokenizer for the same GGUF (the test vectors in
// ../shared/vocab are the acceptance check), except where llama.cpp differs
// from the Hugging Face tokenizer the model was trained with; there they
// match Hugging Face (NFC for Qwen2/Qwen3 vocabularies, Unicode 15 character
// classes, U+180E not whitespace: ../shared/vocab/*.hf-divergent.jsonl).
//
// Contract: Encode() takes valid UTF-8 (callers validate user input with
// IsValidUtf8 first and report INVALID_ARGUMENT otherwise). Piece() gives the
// raw bytes a token stands for in generated text; a piece may be only part
// of a UTF-8 character (byte tokens), which is why streaming goes through
// Utf8StreamDecoder.
//
// Merge lookups: every Encode adds the pair lookups its merge loops made
// (BPE: merge-table lookups; SentencePiece: vocabulary lookups of two
// adjacent symbols joined) to a counter, merge_lookups(). It is the merging
// work, the same on every machine and under any load, so tests show with it
// that encoding stays linear in the text without timing it.
//
// Ownership: a Tokenizer copies everything it needs out of the GgufFile; it
// does not keep a reference to it. Immutable after construction (but for
// the merge-lookup counter, an atomic), so it is safe to share between
// threads.
#ifndef KVSESSION_MODEL_TOKENIZER_H_
#define KVSESSION_MODEL_TOKENIZER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
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
  // (User-defined tokens, type 4, are matched either way, as in llama.cpp.)
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_special,
                                      bool parse_special = false) const = 0;

  // Token ids for text that continues a sequence which already has content
  // (appending to a session): no BOS/EOS, and no SentencePiece leading-space
  // prefix (which belongs to the start of a text only), so "Hello" followed
  // by " world" tokenizes like "Hello world" would.
  virtual std::vector<int32_t> EncodeContinuation(std::string_view text,
                                                  bool parse_special = false) const {
    return Encode(text, /*add_special=*/false, parse_special);
  }

  // The bytes token `id` contributes to generated text: "▁" becomes " "
  // (SPM), byte tokens become their byte, byte-level BPE symbols map back to
  // bytes, control tokens contribute nothing. Out-of-range ids give "".
  virtual std::string Piece(int32_t id) const = 0;

  // Concatenated pieces (may end in an incomplete UTF-8 sequence).
  std::string Decode(std::span<const int32_t> ids) const;

  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  std::string_view token_text(int32_t id) const;  // the raw vocabulary string
  TokenType token_type(int32_t id) const;
  // Whether special token `id` swallows the ASCII whitespace after it when
  // text is split on special tokens (llama.cpp's RSTRIP attribute: Phi-3's
  // markers); false for any other id.
  bool StripsWhitespaceAfter(int32_t id) const;
  // What such a token leaves of the text after it: `text` without its
  // leading ASCII whitespace (space, \t, \n, \v, \f, \r).
  static std::string_view AfterSwallowedWhitespace(std::string_view text);
  int32_t bos_id() const { return bos_id_; }  // -1 when the vocabulary has none
  int32_t eos_id() const { return eos_id_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  // True for tokens that end generation: EOS, EOT/EOM and every token
  // llama.cpp treats as end-of-generation: by text ("<|im_end|>", "<|end|>",
  // "<|eot_id|>", "<|eom_id|>", "<|endoftext|>", "<|end_of_text|>",
  // "<end_of_turn>", ...) and the fill-in-the-middle pad, repository and
  // file-separator tokens (Qwen: "<|fim_pad|>", "<|repo_name|>",
  // "<|file_sep|>"). Those found by text are made control tokens; the
  // EOS/EOT/EOM ids keep the type the file gives them, as in llama.cpp (a
  // file that marks its EOS normal streams its text under ignore_eos).
  bool IsEndOfGeneration(int32_t id) const;
  const std::vector<int32_t>& end_of_generation_ids() const { return eog_ids_; }
  // "llama" or "gpt2".
  virtual std::string_view model_name() const = 0;

  // The merge lookups all Encode calls on this tokenizer have made so far
  // (see the top of this file).
  uint64_t merge_lookups() const { return merge_lookups_.load(std::memory_order_relaxed); }

 protected:
  // What a family assumes when the GGUF does not say (llama.cpp's defaults).
  struct VocabularyDefaults {
    int32_t bos_id = -1;
    int32_t eos_id = -1;
    bool add_bos = false;
    bool add_eos = false;
  };

  // A run of input text to tokenize (token == -1), or a special token found
  // in the input (`text` is the matched text).
  struct Fragment {
    std::string_view text;
    int32_t token = -1;
  };

  Tokenizer() = default;

  // Fills the members below from the GGUF's `tokenizer.ggml.*` keys: tokens,
  // types, special ids, add_bos/add_eos, the EOG set and the special-token
  // table. InvalidArgument for an inconsistent vocabulary.
  absl::Status LoadVocabulary(const GgufFile& gguf, const VocabularyDefaults& defaults);

  // The id whose text is exactly `text`, or -1.
  int32_t FindToken(std::string_view text) const;

  // Adds one Encode call's merge lookups to merge_lookups().
  void CountMergeLookups(uint64_t lookups) const {
    merge_lookups_.fetch_add(lookups, std::memory_order_relaxed);
  }

  // The byte a byte token's text "<0xNN>" stands for, or -1 for other text.
  static int ByteOfByteToken(std::string_view text);

  // Splits `text` around the special tokens it contains, as llama.cpp does
  // before model tokenization: control and unknown tokens only with
  // `parse_special`, user-defined tokens always; longer token texts take
  // precedence. Never returns an empty text fragment.
  std::vector<Fragment> SplitSpecialTokens(std::string_view text, bool parse_special) const;

  // Token texts: views into token_bytes_ (every text, in id order), which
  // this object owns and never changes after LoadTokenTexts.
  std::vector<std::string_view> tokens_;
  std::vector<TokenType> types_;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
  std::vector<int32_t> eog_ids_;  // sorted

 private:
  // A token that SplitSpecialTokens looks for; `strip_right`: it swallows
  // the whitespace after it (llama.cpp's RSTRIP attribute).
  struct SpecialToken {
    int32_t id;
    bool strip_right;
  };

  absl::Status LoadTokenTexts(const GgufFile& gguf);
  absl::Status LoadTokenTypes(const GgufFile& gguf);
  absl::Status LoadSpecialIds(const GgufFile& gguf, const VocabularyDefaults& defaults);
  absl::Status BuildEndOfGenerationSet(const GgufFile& gguf);
  void BuildSpecialTokenTable(const GgufFile& gguf);
  // Indices into special_tokens_ of the tokens that occur in `text` and
  // apply (see SplitSpecialTokens), in precedence order.
  std::vector<size_t> SpecialTokensIn(std::string_view text, bool parse_special) const;

  std::unique_ptr<char[]> token_bytes_;
  absl::flat_hash_map<std::string_view, int32_t> token_ids_;  // keys: tokens_' views
  mutable std::atomic<uint64_t> merge_lookups_{0};
  int32_t eot_id_ = -1;
  int32_t eom_id_ = -1;
  std::vector<SpecialToken> special_tokens_;  // longest text first
  std::vector<int32_t> special_index_;        // per id: index in special_tokens_ or -1
  std::vector<size_t> special_text_lengths_;  // distinct, ascending
  std::array<bool, 256> special_first_byte_{};
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
  const std::string& pending_bytes() const { return pending_; }

 private:
  std::string pending_;
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_TOKENIZER_H_
