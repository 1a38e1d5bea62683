// SpmTokenizer: the SentencePiece-style tokenizer of `tokenizer.ggml.model =
// "llama"` vocabularies (Llama 1/2, Mistral, Phi-3, TinyLlama, ...), with
// llama.cpp's behavior.
//
// Contract: spaces become U+2581 "▁" and, when `add_space_prefix` (default
// true, `tokenizer.ggml.add_space_prefix` overrides) holds, a "▁" is put in
// front of the text and of every text fragment that follows a special token.
// The text is split into characters, then adjacent symbols are merged
// greedily, always taking the pair whose merged text is the vocabulary token
// with the highest score (leftmost first on ties; 0.0 and -0.0 tie; a NaN
// score counts below every number). Characters that are not
// tokens fall back to byte tokens <0xNN> (the unknown token when the
// vocabulary has none). BOS is added by default, EOS is not.
//
// Ownership: copies what it needs from the GgufFile; immutable afterwards,
// so concurrent Encode/Piece calls are safe.
#ifndef KVSESSION_MODEL_SPM_TOKENIZER_H_
#define KVSESSION_MODEL_SPM_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/gguf_file.h"
#include "model/tokenizer.h"

namespace kvs {

class SpmTokenizer final : public Tokenizer {
 public:
  static constexpr std::string_view kModelName = "llama";

  // Called by Tokenizer::FromGguf for "llama" vocabularies.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(const GgufFile& gguf);

  std::vector<int32_t> EncodeContinuation(std::string_view text,
                                          bool parse_special) const override;
  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool parse_special = false) const override;
  std::string Piece(int32_t id) const override;
  std::string_view model_name() const override { return kModelName; }

  bool add_space_prefix() const { return add_space_prefix_; }

 private:
  SpmTokenizer() = default;

  absl::Status LoadModel(const GgufFile& gguf);
  // Tokenizes one text fragment whose spaces are already "▁"; adds the
  // merge lookups it made to `*merge_lookups`.
  void EncodeSegment(std::string_view text, std::vector<int32_t>* out,
                     uint64_t* merge_lookups) const;
  std::vector<int32_t> EncodeText(std::string_view text, bool add_special, bool parse_special,
                                  bool at_start) const;
  // The byte-fallback tokens for a character that is not in the vocabulary.
  void AppendByteTokens(std::string_view bytes, std::vector<int32_t>* out) const;

  std::vector<int32_t> score_ranks_;  // per token: 0 = highest score (ScoreRanks)
  int32_t unknown_id_ = -1;
  std::array<int32_t, 256> byte_token_ids_{};  // -1 when a byte has no token
  bool add_space_prefix_ = true;
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_SPM_TOKENIZER_H_
