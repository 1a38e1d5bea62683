// BpeTokenizer: the byte-level BPE tokenizer of `tokenizer.ggml.model =
// "gpt2"` vocabularies (GPT-2, Llama 3, Qwen2/3, DeepSeek, Falcon,
// StarCoder, ...), with llama.cpp's behavior.
//
// Contract: for `tokenizer.ggml.pre` = "qwen2" (Qwen2, Qwen2.5, Qwen3), whose
// Hugging Face tokenizer.json has an NFC normalizer, each text fragment
// between special tokens is first normalized to NFC (ICU); other
// vocabularies have no normalizer and see the text as given. Then the text
// is split by the pre-tokenizer `tokenizer.ggml.pre`
// names (model/pretokenizer.h); each piece's bytes are mapped to GPT-2's
// printable byte alphabet and merged pair by pair, always applying the merge
// of lowest rank (its index in `tokenizer.ggml.merges`, leftmost first on
// ties), until no listed merge applies. With llama.cpp's `ignore_merges`
// (Llama 3 family) a piece that is itself a vocabulary token is emitted
// whole. BOS is added only if the GGUF says so (or, as in llama.cpp, for the
// Llama 3 family); EOS likewise. A byte whose symbol is not in the
// vocabulary is dropped, as llama.cpp does (never happens with a complete
// byte-level vocabulary).
//
// Ownership: copies what it needs from the GgufFile; immutable afterwards,
// so concurrent Encode/Piece calls are safe.
#ifndef KVSESSION_MODEL_BPE_TOKENIZER_H_
#define KVSESSION_MODEL_BPE_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "model/gguf_file.h"
#include "model/pretokenizer.h"
#include "model/tokenizer.h"

namespace kvs {

class BpeTokenizer final : public Tokenizer {
 public:
  static constexpr std::string_view kModelName = "gpt2";

  // Called by Tokenizer::FromGguf for "gpt2" vocabularies.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(const GgufFile& gguf);

  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool parse_special = false) const override;
  std::string Piece(int32_t id) const override;
  std::string_view model_name() const override { return kModelName; }

  PreTokenizerKind pre_tokenizer_kind() const { return pre_tokenizer_.kind(); }

 private:
  // What merging the pair (left, right) gives: its priority and the token.
  struct Merge {
    int32_t rank;
    int32_t result;
  };

  explicit BpeTokenizer(PreTokenizer pre_tokenizer);

  absl::Status LoadMerges(const GgufFile& gguf);
  // The merge of two adjacent tokens, or nullptr.
  const Merge* FindMerge(int32_t left, int32_t right) const;
  // Tokenizes one pre-tokenizer piece (raw bytes); adds the merge lookups
  // it made to `*merge_lookups`.
  void EncodeWord(std::string_view word, std::vector<int32_t>* out,
                  uint64_t* merge_lookups) const;

  PreTokenizer pre_tokenizer_;
  bool ignore_merges_ = false;
  bool normalize_nfc_ = false;  // the HF normalizer is NFC ("qwen2")
  absl::flat_hash_map<uint64_t, Merge> merges_;  // key: left id << 32 | right id
  std::array<int32_t, 256> byte_token_ids_{};    // token of each byte's symbol, or -1
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_BPE_TOKENIZER_H_
