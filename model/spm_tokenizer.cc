// SpmTokenizer: see model/spm_tokenizer.h for the contract.
//
// The merge loop keeps the text's symbols in a doubly linked list (indices
// into a vector) and the candidate pairs in a MergeQueue (model/merge_queue.h)
// keyed by the merged token's score rank (0 = the highest score); a popped pair
// whose symbols changed since it was queued is stale and skipped. Every
// merged symbol is a vocabulary token by construction (a pair is only queued
// when its text is one), so at the end only single characters can be
// missing from the vocabulary, and those fall back to byte tokens.
#include "model/spm_tokenizer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/merge_queue.h"
#include "model/utf8.h"

namespace kvs {
namespace {

// U+2581 LOWER ONE EIGHTH BLOCK: SentencePiece's visible space.
constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";
// What SentencePiece prints for the unknown token.
constexpr std::string_view kUnknownPiece = " \xE2\x81\x87 ";

// One symbol of the text being merged: a byte range plus list links.
struct Symbol {
  int32_t prev;
  int32_t next;
  uint32_t begin;
  uint32_t size;  // 0 once merged into its left neighbor
};

// A candidate merge of two adjacent symbols into the token of score rank
// `key`.
struct Bigram {
  int32_t key;
  int32_t left;
  int32_t right;
  uint32_t size;  // bytes of the merged text when queued
};

// Each token's score rank: 0 for the highest score, equal scores equal
// ranks, NaN below every number. Merging by lowest rank is merging by
// highest score.
std::vector<int32_t> ScoreRanks(const std::vector<float>& scores) {
  const auto higher = [](float a, float b) {
    if (std::isnan(a)) return false;
    return std::isnan(b) || a > b;
  };
  std::vector<int32_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return higher(scores[a], scores[b]); });
  std::vector<int32_t> ranks(scores.size());
  int32_t rank = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i > 0 && higher(scores[order[i - 1]], scores[order[i]])) ++rank;
    ranks[order[i]] = rank;
  }
  return ranks;
}

// `text` with every occurrence of `from` replaced by `to`.
std::string ReplaceAll(std::string_view text, std::string_view from, std::string_view to) {
  std::string result;
  result.reserve(text.size());
  for (size_t pos = 0;;) {
    const size_t match = text.find(from, pos);
    if (match == std::string_view::npos) {
      result.append(text.substr(pos));
      return result;
    }
    result.append(text.substr(pos, match - pos));
    result.append(to);
    pos = match + from.size();
  }
}

absl::StatusOr<std::vector<float>> ReadScores(const GgufFile& gguf, size_t n_tokens) {
  constexpr char kScoresKey[] = "tokenizer.ggml.scores";
  std::vector<float> scores;
  if (gguf.Find(kScoresKey) == nullptr) {
    scores.assign(n_tokens, 0.0f);
    return scores;
  }
  absl::StatusOr<std::vector<float>> floats = gguf.GetFloatArray(kScoresKey);
  if (floats.ok()) {
    scores = *std::move(floats);
  } else {
    // Some converters store integer scores.
    absl::StatusOr<std::vector<int64_t>> ints = gguf.GetIntArray(kScoresKey);
    if (!ints.ok()) return floats.status();
    scores.assign(ints->begin(), ints->end());
  }
  if (scores.size() != n_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(gguf.path(), ": ", kScoresKey, " has ",
                                                   scores.size(), " entries for ", n_tokens,
                                                   " tokens"));
  }
  return scores;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> SpmTokenizer::Create(const GgufFile& gguf) {
  std::unique_ptr<SpmTokenizer> tokenizer(new SpmTokenizer());
  // llama.cpp's SPM defaults: <s> = 1, </s> = 2, BOS added, EOS not.
  const VocabularyDefaults defaults = {.bos_id = 1, .eos_id = 2, .add_bos = true, .add_eos = false};
  if (absl::Status status = tokenizer->LoadVocabulary(gguf, defaults); !status.ok()) {
    return status;
  }
  if (absl::Status status = tokenizer->LoadModel(gguf); !status.ok()) return status;
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

absl::Status SpmTokenizer::LoadModel(const GgufFile& gguf) {
  absl::StatusOr<std::vector<float>> scores = ReadScores(gguf, tokens_.size());
  if (!scores.ok()) return scores.status();
  score_ranks_ = ScoreRanks(*scores);

  absl::StatusOr<int64_t> unknown = gguf.GetInt("tokenizer.ggml.unknown_token_id", 0);
  if (!unknown.ok()) return unknown.status();
  unknown_id_ = *unknown >= 0 && *unknown < vocab_size() ? static_cast<int32_t>(*unknown) : -1;

  absl::StatusOr<bool> add_space_prefix = gguf.GetBool("tokenizer.ggml.add_space_prefix", true);
  if (!add_space_prefix.ok()) return add_space_prefix.status();
  add_space_prefix_ = *add_space_prefix;

  for (int byte = 0; byte < 256; ++byte) {
    int32_t id = FindToken(absl::StrFormat("<0x%02X>", byte));
    if (id < 0) id = FindToken(std::string(1, static_cast<char>(byte)));
    byte_token_ids_[byte] = id >= 0 ? id : unknown_id_;
  }
  return absl::OkStatus();
}

std::vector<int32_t> SpmTokenizer::Encode(std::string_view text, bool add_special,
                                          bool parse_special) const {
  return EncodeText(text, add_special, parse_special, /*at_start=*/true);
}

std::vector<int32_t> SpmTokenizer::EncodeContinuation(std::string_view text,
                                                      bool parse_special) const {
  return EncodeText(text, /*add_special=*/false, parse_special, /*at_start=*/false);
}

std::vector<int32_t> SpmTokenizer::EncodeText(std::string_view text, bool add_special,
                                              bool parse_special, bool at_start) const {
  std::vector<int32_t> ids;
  uint64_t merge_lookups = 0;
  if (add_special && add_bos_) ids.push_back(bos_id_);

  // The start of the text counts as "after special" (it gets the space prefix).
  bool after_special = at_start;
  std::string segment;
  for (const Fragment& fragment : SplitSpecialTokens(text, parse_special)) {
    if (fragment.token >= 0) {
      ids.push_back(fragment.token);
      after_special = true;
      continue;
    }
    segment.clear();
    if (add_space_prefix_ && after_special) segment.append(kSpaceMarker);
    segment += ReplaceAll(fragment.text, " ", kSpaceMarker);
    EncodeSegment(segment, &ids, &merge_lookups);
    after_special = false;
  }

  if (add_special && add_eos_) ids.push_back(eos_id_);
  CountMergeLookups(merge_lookups);
  return ids;
}

void SpmTokenizer::EncodeSegment(std::string_view text, std::vector<int32_t>* out,
                                 uint64_t* merge_lookups) const {
  // One symbol per character: a lead byte and the length it names (cut
  // at the text's end), so that invalid UTF-8 still splits into symbols.
  // Counted first and reserved exactly, so that a megabyte of text is not
  // copied as the vector grows.
  const auto symbol_size = [text](size_t pos) {
    return std::min(utf8::LeadByteLength(static_cast<uint8_t>(text[pos])), text.size() - pos);
  };
  size_t n_symbols = 0;
  for (size_t pos = 0; pos < text.size(); pos += symbol_size(pos)) ++n_symbols;
  std::vector<Symbol> symbols;
  symbols.reserve(n_symbols);
  for (size_t pos = 0; pos < text.size();) {
    const size_t size = symbol_size(pos);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, pos + size < text.size() ? index + 1 : -1,
                       static_cast<uint32_t>(pos), static_cast<uint32_t>(size)});
    pos += size;
  }
  if (symbols.empty()) return;

  MergeQueue<Bigram> queue;  // highest score (lowest rank) first, then leftmost
  const auto try_add_bigram = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t size = symbols[left].size + symbols[right].size;
    ++*merge_lookups;
    const int32_t id = FindToken(text.substr(symbols[left].begin, size));
    if (id >= 0) queue.Push({score_ranks_[id], left, right, size});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add_bigram(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.Pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    const bool stale = left.size == 0 || right.size == 0 || left.size + right.size != bigram.size;
    if (stale) continue;

    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add_bigram(left.prev, bigram.left);
    try_add_bigram(bigram.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].begin, symbols[i].size);
    const int32_t id = FindToken(piece);
    if (id >= 0) {
      out->push_back(id);
    } else {
      AppendByteTokens(piece, out);
    }
  }
}

void SpmTokenizer::AppendByteTokens(std::string_view bytes, std::vector<int32_t>* out) const {
  for (char c : bytes) {
    const int32_t id = byte_token_ids_[static_cast<uint8_t>(c)];
    if (id >= 0) out->push_back(id);
  }
}

std::string SpmTokenizer::Piece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  const std::string_view text = tokens_[id];
  switch (types_[id]) {
    case TokenType::kNormal:
      return ReplaceAll(text, kSpaceMarker, " ");
    case TokenType::kByte: {
      const int byte = ByteOfByteToken(text);
      return byte >= 0 ? std::string(1, static_cast<char>(byte)) : std::string(text);
    }
    case TokenType::kUserDefined:
      return std::string(text);
    case TokenType::kUnknown:
      return std::string(kUnknownPiece);
    case TokenType::kControl:
    case TokenType::kUnused:
    case TokenType::kUndefined:
      return "";
  }
  return "";
}

}  // namespace kvs
