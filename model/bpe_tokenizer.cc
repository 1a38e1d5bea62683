// BpeTokenizer: see model/bpe_tokenizer.h for the contract.
//
// Merging works on token ids: each byte of a piece starts as the token of its
// printable symbol, and a merge table keyed by (left id, right id) gives the
// rank and the merged token. Symbols form a linked list over a vector and
// candidate pairs sit in a MergeQueue popping (rank, position) in order
// (model/merge_queue.h), so a piece of n bytes costs O(n log n) however
// long it is, and a long run of one symbol a sweep per round of merges. A popped pair is applied only
// if both symbols still hold the tokens it was queued with and are still
// adjacent; otherwise it is stale (a newer pair was queued when they changed).
#include "model/bpe_tokenizer.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/merge_queue.h"
#include "model/unicode_classes.h"
#include "model/utf8.h"

namespace kvs {
namespace {

constexpr char kMergesKey[] = "tokenizer.ggml.merges";

// GPT-2's reversible map from bytes to printable code points: the printable
// Latin-1 bytes stand for themselves, the other 68 bytes (controls, space,
// DEL, NBSP, soft hyphen) take U+0100.. in byte order, so that every token
// text is printable and space-free.
class ByteAlphabet {
 public:
  static const ByteAlphabet& Get() {
    static const ByteAlphabet* const kAlphabet = new ByteAlphabet();
    return *kAlphabet;
  }

  // The UTF-8 text of the symbol standing for `byte`.
  std::string_view Symbol(uint8_t byte) const { return symbols_[byte]; }

  // The byte a symbol's code point stands for, or -1.
  int ByteOf(char32_t code_point) const {
    return code_point < bytes_.size() ? bytes_[code_point] : -1;
  }

 private:
  static bool StandsForItself(int byte) {
    return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
           (byte >= 0xAE && byte <= 0xFF);
  }

  ByteAlphabet() {
    bytes_.fill(-1);
    char32_t next_substitute = 0x100;
    for (int byte = 0; byte < 256; ++byte) {
      const char32_t code_point =
          StandsForItself(byte) ? static_cast<char32_t>(byte) : next_substitute++;
      utf8::AppendCodePoint(code_point, &symbols_[byte]);
      bytes_[code_point] = static_cast<int16_t>(byte);
    }
  }

  std::array<std::string, 256> symbols_;
  std::array<int16_t, 0x100 + 68> bytes_;  // by code point
};

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// One symbol of the piece being merged.
struct Symbol {
  int32_t token;  // -1 once merged away (or if the byte has no token)
  int32_t prev;
  int32_t next;
};

// A pair of adjacent symbols that a merge applies to.
struct Candidate {
  int32_t key;  // the merge's rank
  int32_t left;
  int32_t right;
  int32_t left_token;
  int32_t right_token;
  int32_t result;
};

}  // namespace

BpeTokenizer::BpeTokenizer(PreTokenizer pre_tokenizer) : pre_tokenizer_(std::move(pre_tokenizer)) {}

absl::StatusOr<std::unique_ptr<Tokenizer>> BpeTokenizer::Create(const GgufFile& gguf) {
  absl::StatusOr<std::string_view> pre = gguf.GetString("tokenizer.ggml.pre", "");
  if (!pre.ok()) return pre.status();
  absl::StatusOr<PreTokenizerKind> kind = PreTokenizerKindFromName(*pre);
  if (!kind.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(gguf.path(), ": ", kind.status().message()));
  }
  absl::StatusOr<PreTokenizer> pre_tokenizer = PreTokenizer::Create(*kind);
  if (!pre_tokenizer.ok()) return pre_tokenizer.status();

  std::unique_ptr<BpeTokenizer> tokenizer(new BpeTokenizer(*std::move(pre_tokenizer)));
  // llama.cpp adds BOS by default only for the Llama 3 family, which also
  // emits a piece that is a whole vocabulary token without merging it.
  const bool llama3 = *kind == PreTokenizerKind::kLlama3;
  const VocabularyDefaults defaults = {
      .bos_id = -1, .eos_id = -1, .add_bos = llama3, .add_eos = false};
  if (absl::Status status = tokenizer->LoadVocabulary(gguf, defaults); !status.ok()) {
    return status;
  }
  tokenizer->ignore_merges_ = llama3;
  // Keyed on the `pre` name, not the family: of the names that share the
  // Qwen2 regexes, only Qwen2/Qwen3's own tokenizer.json normalizes to NFC.
  tokenizer->normalize_nfc_ = *pre == "qwen2";
  if (absl::Status status = tokenizer->LoadMerges(gguf); !status.ok()) return status;
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

absl::Status BpeTokenizer::LoadMerges(const GgufFile& gguf) {
  const ByteAlphabet& alphabet = ByteAlphabet::Get();
  for (int byte = 0; byte < 256; ++byte) {
    byte_token_ids_[byte] = FindToken(alphabet.Symbol(static_cast<uint8_t>(byte)));
  }

  absl::StatusOr<const std::vector<std::string_view>*> merges = gguf.GetStringArray(kMergesKey);
  if (!merges.ok()) {
    if (absl::IsNotFound(merges.status())) {
      return absl::InvalidArgumentError(absl::StrCat(gguf.path(), ": no ", kMergesKey));
    }
    return merges.status();
  }
  merges_.reserve((*merges)->size());
  std::string joined;  // left and right's texts together, reused
  int32_t rank = 0;
  for (std::string_view merge : **merges) {
    // "left right"; the separator is searched from the second byte so that
    // a left part starting with a space still parses.
    const size_t separator = merge.find(' ', 1);
    if (separator == std::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(gguf.path(), ": ", kMergesKey, "[", rank,
                                                     "] = '", std::string(merge),
                                                     "' is not \"left right\""));
    }
    const std::string_view left_text = merge.substr(0, separator);
    const std::string_view right_text = merge.substr(separator + 1);
    const int32_t left = FindToken(left_text);
    const int32_t right = FindToken(right_text);
    joined.assign(left_text).append(right_text);
    const int32_t result = FindToken(joined);
    // A merge whose parts or result are not tokens can never produce a
    // token; such entries (absent from consistent vocabularies) are unused.
    if (left >= 0 && right >= 0 && result >= 0) {
      merges_.try_emplace(PairKey(left, right), Merge{rank, result});
    }
    ++rank;
  }
  return absl::OkStatus();
}

const BpeTokenizer::Merge* BpeTokenizer::FindMerge(int32_t left, int32_t right) const {
  auto it = merges_.find(PairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

std::vector<int32_t> BpeTokenizer::Encode(std::string_view text, bool add_special,
                                          bool parse_special) const {
  std::vector<int32_t> ids;
  uint64_t merge_lookups = 0;
  if (add_special && add_bos_) ids.push_back(bos_id_);
  for (const Fragment& fragment : SplitSpecialTokens(text, parse_special)) {
    if (fragment.token >= 0) {
      ids.push_back(fragment.token);
      continue;
    }
    if (normalize_nfc_) {
      const std::string normalized = NormalizeNfc(fragment.text);
      for (std::string_view word : pre_tokenizer_.Split(normalized)) {
        EncodeWord(word, &ids, &merge_lookups);
      }
    } else {
      for (std::string_view word : pre_tokenizer_.Split(fragment.text)) {
        EncodeWord(word, &ids, &merge_lookups);
      }
    }
  }
  if (add_special && add_eos_) ids.push_back(eos_id_);
  CountMergeLookups(merge_lookups);
  return ids;
}

void BpeTokenizer::EncodeWord(std::string_view word, std::vector<int32_t>* out,
                              uint64_t* merge_lookups) const {
  if (ignore_merges_) {
    std::string symbols_text;
    for (char c : word) symbols_text.append(ByteAlphabet::Get().Symbol(static_cast<uint8_t>(c)));
    ++*merge_lookups;
    const int32_t whole = FindToken(symbols_text);
    if (whole >= 0) {
      out->push_back(whole);
      return;
    }
  }

  const auto n = static_cast<int32_t>(word.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_token_ids_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};
  }

  MergeQueue<Candidate> queue;  // lowest rank first, then leftmost
  const auto try_add_candidate = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t left_token = symbols[left].token;
    const int32_t right_token = symbols[right].token;
    if (left_token < 0 || right_token < 0) return;
    ++*merge_lookups;
    if (const Merge* merge = FindMerge(left_token, right_token)) {
      queue.Push({merge->rank, left, right, left_token, right_token, merge->result});
    }
  };
  for (int32_t i = 1; i < n; ++i) try_add_candidate(i - 1, i);

  while (!queue.empty()) {
    const Candidate candidate = queue.Pop();
    Symbol& left = symbols[candidate.left];
    Symbol& right = symbols[candidate.right];
    const bool current = left.token == candidate.left_token &&
                         right.token == candidate.right_token && left.next == candidate.right;
    if (!current) continue;

    left.token = candidate.result;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = candidate.left;
    right.token = -1;
    try_add_candidate(left.prev, candidate.left);
    try_add_candidate(candidate.left, left.next);
  }

  for (int32_t i = 0; i >= 0 && i < n; i = symbols[i].next) {
    if (symbols[i].token >= 0) out->push_back(symbols[i].token);
  }
}

std::string BpeTokenizer::Piece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  const std::string_view text = tokens_[id];
  switch (types_[id]) {
    case TokenType::kNormal: {
      const ByteAlphabet& alphabet = ByteAlphabet::Get();
      std::string bytes;
      for (size_t pos = 0; pos < text.size();) {
        const size_t begin = pos;
        if (utf8::ScanSequence(text, pos).kind != utf8::Sequence::Kind::kValid) {
          bytes.push_back(text[pos++]);  // not a symbol: keep the byte as is
          continue;
        }
        const int byte = alphabet.ByteOf(utf8::DecodeValid(text, &pos));
        if (byte >= 0) {
          bytes.push_back(static_cast<char>(byte));
        } else {
          bytes.append(text, begin, pos - begin);  // not a symbol: keep it
        }
      }
      return bytes;
    }
    case TokenType::kUserDefined:
      return std::string(text);
    case TokenType::kByte: {
      const int byte = ByteOfByteToken(text);
      return byte >= 0 ? std::string(1, static_cast<char>(byte)) : "";
    }
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kUnused:
    case TokenType::kUndefined:
      return "";
  }
  return "";
}

}  // namespace kvs
