// Tokenizer: the family dispatch (FromGguf), the vocabulary loading shared by
// both families, special-token splitting and the EOG set. See
// model/tokenizer.h for the contract; the families live in
// model/spm_tokenizer.cc and model/bpe_tokenizer.cc.
//
// Ownership: everything is copied out of the GgufFile during construction.
#include "model/tokenizer.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "model/bpe_tokenizer.h"
#include "model/spm_tokenizer.h"

namespace kvs {
namespace {

constexpr char kModelKey[] = "tokenizer.ggml.model";
constexpr char kTokensKey[] = "tokenizer.ggml.tokens";
constexpr char kTokenTypeKey[] = "tokenizer.ggml.token_type";

// Token texts llama.cpp treats as end-of-generation whatever their ids.
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>",         "<|return|>",         "<|call|>",
    "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
    "<|end_of_text|>", "<end_of_utterance>",
};

// Fill-in-the-middle tokens also end generation in llama.cpp (a model that
// emits one has left the document): the pad, repository and file-separator
// tokens, from `tokenizer.ggml.fim_{pad,rep,sep}_token_id` or else found by
// these texts (first present wins, as in llama.cpp).
struct FimToken {
  std::string_view key;
  std::initializer_list<std::string_view> texts;
};
const FimToken kFimEndOfGeneration[] = {
    {"tokenizer.ggml.fim_pad_token_id", {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"}},
    {"tokenizer.ggml.fim_rep_token_id",
     {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
    {"tokenizer.ggml.fim_sep_token_id", {"<|file_sep|>", "<file_sep>"}},
};

// Whitespace as C's isspace() in the "C" locale; used for the strip rules.
bool IsAsciiSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

TokenType TokenTypeFromGguf(int64_t value) {
  if (value < static_cast<int64_t>(TokenType::kUndefined) ||
      value > static_cast<int64_t>(TokenType::kByte)) {
    return TokenType::kUndefined;
  }
  return static_cast<TokenType>(value);
}

// A special token id from `key`: `fallback` when absent, -1 for the "none"
// markers (-1 as a signed value, 0xFFFFFFFF as an unsigned one).
absl::StatusOr<int32_t> ReadTokenId(const GgufFile& gguf, std::string_view key, int32_t fallback,
                                    size_t vocab_size) {
  absl::StatusOr<int64_t> value = gguf.GetInt(key, fallback);
  if (!value.ok()) return value.status();
  if (*value == -1 || *value == int64_t{0xFFFFFFFF}) return -1;
  if (*value < 0 || static_cast<uint64_t>(*value) >= vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(gguf.path(), ": ", std::string(key), " = ",
                                                   *value, " is outside the vocabulary (",
                                                   vocab_size, " tokens)"));
  }
  return static_cast<int32_t>(*value);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& gguf) {
  absl::StatusOr<std::string_view> model = gguf.GetString(kModelKey);
  if (!model.ok()) {
    if (absl::IsNotFound(model.status())) {
      return absl::InvalidArgumentError(
          absl::StrCat(gguf.path(), ": no ", kModelKey, ": the file has no tokenizer"));
    }
    return model.status();
  }
  if (*model == SpmTokenizer::kModelName) return SpmTokenizer::Create(gguf);
  if (*model == BpeTokenizer::kModelName) return BpeTokenizer::Create(gguf);
  return absl::InvalidArgumentError(absl::StrCat(gguf.path(), ": unsupported ", kModelKey, " ",
                                                 QuoteGgufString(*model),
                                                 " (supported: 'llama', 'gpt2')"));
}

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::string text;
  for (int32_t id : ids) text += Piece(id);
  return text;
}

std::string_view Tokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return tokens_[id];
}

TokenType Tokenizer::token_type(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return TokenType::kUndefined;
  return types_[id];
}

bool Tokenizer::IsEndOfGeneration(int32_t id) const {
  return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

int32_t Tokenizer::FindToken(std::string_view text) const {
  auto it = token_ids_.find(text);
  return it == token_ids_.end() ? -1 : it->second;
}

int Tokenizer::ByteOfByteToken(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return -1;
    }
    value = value * 16 + digit;
  }
  return value;
}

absl::Status Tokenizer::LoadVocabulary(const GgufFile& gguf, const VocabularyDefaults& defaults) {
  if (absl::Status status = LoadTokenTexts(gguf); !status.ok()) return status;
  if (absl::Status status = LoadTokenTypes(gguf); !status.ok()) return status;
  if (absl::Status status = LoadSpecialIds(gguf, defaults); !status.ok()) return status;
  if (absl::Status status = BuildEndOfGenerationSet(gguf); !status.ok()) return status;
  BuildSpecialTokenTable(gguf);
  return absl::OkStatus();
}

absl::Status Tokenizer::LoadTokenTexts(const GgufFile& gguf) {
  absl::StatusOr<const std::vector<std::string_view>*> texts = gguf.GetStringArray(kTokensKey);
  if (!texts.ok()) {
    if (absl::IsNotFound(texts.status())) {
      return absl::InvalidArgumentError(absl::StrCat(gguf.path(), ": no ", kTokensKey));
    }
    return texts.status();
  }
  const std::vector<std::string_view>& words = **texts;
  if (words.empty() || words.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat(gguf.path(), ": ", kTokensKey, " has ", words.size(), " tokens"));
  }
  // llama.cpp renames empty tokens so that every text is distinct.
  const auto renamed = [](size_t i) { return absl::StrCat("[EMPTY_", i, "]"); };
  size_t bytes = 0;
  for (size_t i = 0; i < words.size(); ++i) bytes += words[i].empty() ? renamed(i).size() : words[i].size();
  token_bytes_ = std::make_unique_for_overwrite<char[]>(bytes);
  tokens_.reserve(words.size());
  token_ids_.reserve(words.size());
  char* at = token_bytes_.get();
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string empty_name = words[i].empty() ? renamed(i) : std::string();
    const std::string_view source = words[i].empty() ? std::string_view(empty_name) : words[i];
    std::memcpy(at, source.data(), source.size());
    const std::string_view text(at, source.size());
    at += source.size();
    const auto [it, inserted] = token_ids_.try_emplace(text, static_cast<int32_t>(i));
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(gguf.path(), ": duplicate token ", QuoteGgufString(text),
                                                     " has ids ", it->second, " and ", i));
    }
    tokens_.push_back(text);
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::LoadTokenTypes(const GgufFile& gguf) {
  absl::StatusOr<std::vector<int64_t>> types = gguf.GetIntArray(kTokenTypeKey);
  if (!types.ok()) {
    if (!absl::IsNotFound(types.status())) return types.status();
    types_.assign(tokens_.size(), TokenType::kNormal);
    return absl::OkStatus();
  }
  if (types->size() != tokens_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(gguf.path(), ": ", kTokenTypeKey, " has ",
                                                   types->size(), " entries for ", tokens_.size(),
                                                   " tokens"));
  }
  types_.reserve(types->size());
  for (int64_t type : *types) types_.push_back(TokenTypeFromGguf(type));
  return absl::OkStatus();
}

absl::Status Tokenizer::LoadSpecialIds(const GgufFile& gguf, const VocabularyDefaults& defaults) {
  const size_t n = tokens_.size();
  // Defaults outside the vocabulary mean "none" (llama.cpp disables them).
  const auto in_vocab = [n](int32_t id) {
    return id >= 0 && static_cast<size_t>(id) < n ? id : -1;
  };
  absl::StatusOr<int32_t> bos =
      ReadTokenId(gguf, "tokenizer.ggml.bos_token_id", in_vocab(defaults.bos_id), n);
  absl::StatusOr<int32_t> eos =
      ReadTokenId(gguf, "tokenizer.ggml.eos_token_id", in_vocab(defaults.eos_id), n);
  absl::StatusOr<int32_t> eot = ReadTokenId(gguf, "tokenizer.ggml.eot_token_id", -1, n);
  absl::StatusOr<int32_t> eom = ReadTokenId(gguf, "tokenizer.ggml.eom_token_id", -1, n);
  absl::StatusOr<bool> add_bos = gguf.GetBool("tokenizer.ggml.add_bos_token", defaults.add_bos);
  absl::StatusOr<bool> add_eos = gguf.GetBool("tokenizer.ggml.add_eos_token", defaults.add_eos);
  for (const absl::Status& status : {bos.status(), eos.status(), eot.status(), eom.status(),
                                     add_bos.status(), add_eos.status()}) {
    if (!status.ok()) return status;
  }
  bos_id_ = *bos;
  eos_id_ = *eos;
  eot_id_ = *eot;
  eom_id_ = *eom;
  add_bos_ = *add_bos;
  add_eos_ = *add_eos;
  if (add_bos_ && bos_id_ < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(gguf.path(), ": the vocabulary adds BOS but has no BOS token"));
  }
  if (add_eos_ && eos_id_ < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(gguf.path(), ": the vocabulary adds EOS but has no EOS token"));
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::BuildEndOfGenerationSet(const GgufFile& gguf) {
  // Like llama.cpp: a token that ends generation is a control token even
  // if the converter marked it otherwise (it renders as nothing and is
  // only matched in text with parse_special).
  const auto add = [this](int32_t id) {
    eog_ids_.push_back(id);
    types_[id] = TokenType::kControl;
  };
  for (const FimToken& fim : kFimEndOfGeneration) {
    absl::StatusOr<int32_t> id = ReadTokenId(gguf, fim.key, -1, tokens_.size());
    if (!id.ok()) return id.status();
    for (auto text = fim.texts.begin(); *id < 0 && text != fim.texts.end(); ++text) {
      *id = FindToken(*text);
    }
    if (*id >= 0) add(*id);
  }
  for (std::string_view text : kEndOfGenerationTexts) {
    const int32_t id = FindToken(text);
    if (id >= 0) add(id);
  }
  for (int32_t id : {eos_id_, eot_id_, eom_id_}) {
    if (id >= 0) eog_ids_.push_back(id);
  }
  std::sort(eog_ids_.begin(), eog_ids_.end());
  eog_ids_.erase(std::unique(eog_ids_.begin(), eog_ids_.end()), eog_ids_.end());
  return absl::OkStatus();
}

void Tokenizer::BuildSpecialTokenTable(const GgufFile& gguf) {
  for (int32_t id = 0; id < vocab_size(); ++id) {
    const TokenType type = types_[id];
    if (type == TokenType::kControl || type == TokenType::kUserDefined ||
        type == TokenType::kUnknown) {
      special_tokens_.push_back({id, /*strip_right=*/false});
    }
  }
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(),
                   [this](const SpecialToken& a, const SpecialToken& b) {
                     return tokens_[a.id].size() > tokens_[b.id].size();
                   });

  // llama.cpp's per-model attribute rule: in Phi-3 vocabularies the special
  // tokens (except <unk>, <s> and <|endoftext|>) swallow the whitespace that
  // follows them. It keys on the model name, as llama.cpp does.
  const std::string model_name =
      absl::AsciiStrToLower(std::string(gguf.GetString("general.name", "").value_or("")));
  const bool phi3 =
      model_name.find("phi-3") != std::string::npos || model_name.find("phi3") != std::string::npos;
  if (phi3) {
    for (SpecialToken& token : special_tokens_) {
      const std::string_view text = tokens_[token.id];
      token.strip_right = text != "<unk>" && text != "<s>" && text != "<|endoftext|>";
    }
  }

  special_index_.assign(tokens_.size(), -1);
  for (size_t i = 0; i < special_tokens_.size(); ++i) {
    const std::string_view text = tokens_[special_tokens_[i].id];
    special_index_[special_tokens_[i].id] = static_cast<int32_t>(i);
    special_text_lengths_.push_back(text.size());
    special_first_byte_[static_cast<uint8_t>(text[0])] = true;
  }
  std::sort(special_text_lengths_.begin(), special_text_lengths_.end());
  special_text_lengths_.erase(
      std::unique(special_text_lengths_.begin(), special_text_lengths_.end()),
      special_text_lengths_.end());
}

bool Tokenizer::StripsWhitespaceAfter(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= special_index_.size() || special_index_[id] < 0) return false;
  return special_tokens_[special_index_[id]].strip_right;
}

std::string_view Tokenizer::AfterSwallowedWhitespace(std::string_view text) {
  while (!text.empty() && IsAsciiSpace(text.front())) text.remove_prefix(1);
  return text;
}

std::vector<size_t> Tokenizer::SpecialTokensIn(std::string_view text, bool parse_special) const {
  std::vector<size_t> found;
  for (size_t pos = 0; pos < text.size(); ++pos) {
    if (!special_first_byte_[static_cast<uint8_t>(text[pos])]) continue;
    for (size_t length : special_text_lengths_) {
      if (length > text.size() - pos) break;
      const int32_t id = FindToken(text.substr(pos, length));
      if (id < 0 || special_index_[id] < 0) continue;
      if (parse_special || types_[id] == TokenType::kUserDefined) {
        found.push_back(static_cast<size_t>(special_index_[id]));
      }
    }
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  return found;
}

std::vector<Tokenizer::Fragment> Tokenizer::SplitSpecialTokens(std::string_view text,
                                                               bool parse_special) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({text, -1});

  // Each applicable token, longest first, splits every text fragment left
  // by the tokens before it (llama.cpp's order, so results agree even when
  // token texts overlap).
  std::vector<Fragment> next;
  for (size_t index : SpecialTokensIn(text, parse_special)) {
    const SpecialToken& special = special_tokens_[index];
    const std::string_view token_text = tokens_[special.id];
    next.clear();
    for (const Fragment& fragment : fragments) {
      if (fragment.token >= 0) {
        next.push_back(fragment);
        continue;
      }
      std::string_view rest = fragment.text;
      for (size_t match = rest.find(token_text); match != std::string_view::npos;
           match = rest.find(token_text)) {
        if (match > 0) next.push_back({rest.substr(0, match), -1});
        next.push_back({rest.substr(match, token_text.size()), special.id});
        rest.remove_prefix(match + token_text.size());
        if (special.strip_right) rest = AfterSwallowedWhitespace(rest);
      }
      if (!rest.empty()) next.push_back({rest, -1});
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace kvs
