// PreTokenizer: the regex lists per `tokenizer.ggml.pre` family and the
// splitting loop over PCRE2 (UTF + UCP mode, so \p{L}, \p{N}, \p{P} and \s
// follow Unicode). See model/pretokenizer.h for the contract.
#include "model/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/tokenizer.h"
#include "model/utf8.h"

namespace kvs {
namespace {

// The GPT-2 pattern: contractions, letters, digits, other symbols (each
// optionally after one space), and whitespace not followed by a
// non-space. The unmatched remainder (a last single space before a word)
// becomes its own piece, as with the published pattern's final `|\s+`.
constexpr char kGpt2Regex[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

// Llama 3's pattern with the case-insensitive contractions spelled out
// (PCRE2's caseless UCP matching would also fold e.g. U+017F into 's').
constexpr char kLlama3Regex[] =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|)"
    R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|)"
    R"(\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2/Qwen3: as Llama 3 but every digit is its own piece.
constexpr char kQwen2Regex[] =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|)"
    R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|)"
    R"(\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek LLM's letter class: Latin, Greek, Cyrillic, Armenian, Georgian,
// Cherokee and other cased scripts, as listed in its tokenizer.json.
constexpr char kDeepseekLetters[] =
    R"(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚ)"
    R"(Ḁ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄ)"
    R"(Ⰰ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)";

// CJK ideographs, a block of other scripts, and Hangul, as one run.
constexpr char kCjkRun[] = R"([一-龥ࠀ-一가-퟿]+)";

const std::vector<std::string>& RegexesFor(PreTokenizerKind kind) {
  static const auto* const kLists = new std::array<std::vector<std::string>, 8>{{
      /*kDefault=*/{R"([\p{P}\$\+<=>\^~\|]+)", kGpt2Regex, R"(\p{N}+)", "[0-9][0-9][0-9]"},
      /*kGpt2=*/{kGpt2Regex},
      /*kLlama3=*/{kLlama3Regex},
      /*kQwen2=*/{kQwen2Regex},
      /*kDeepseekLlm=*/
      {"[\r\n]", kDeepseekLetters, R"(\s?[!-/:-~！-／：-～‘-‟　-。]+)", R"(\s+$)", kCjkRun,
       R"(\p{N}+)"},
      /*kDeepseekCoder=*/
      {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjkRun, R"(\p{N})"},
      /*kFalcon=*/{R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2Regex, "[0-9][0-9][0-9]"},
      /*kStarcoder=*/{R"(\p{N})", kGpt2Regex},
  }};
  return (*kLists)[static_cast<size_t>(kind)];
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};
using MatchData = std::unique_ptr<pcre2_match_data, MatchDataDeleter>;

}  // namespace

absl::StatusOr<PreTokenizerKind> PreTokenizerKindFromName(std::string_view pre) {
  struct NameAndKind {
    std::string_view name;
    PreTokenizerKind kind;
  };
  static constexpr NameAndKind kNames[] = {
      {"", PreTokenizerKind::kDefault},
      {"default", PreTokenizerKind::kDefault},
      {"gpt-2", PreTokenizerKind::kGpt2},
      {"phi-2", PreTokenizerKind::kGpt2},
      {"mpt", PreTokenizerKind::kGpt2},
      {"olmo", PreTokenizerKind::kGpt2},
      {"llama3", PreTokenizerKind::kLlama3},
      {"llama-v3", PreTokenizerKind::kLlama3},
      {"llama-bpe", PreTokenizerKind::kLlama3},
      {"falcon3", PreTokenizerKind::kLlama3},
      {"qwen2", PreTokenizerKind::kQwen2},
      {"deepseek-r1-qwen", PreTokenizerKind::kQwen2},
      {"deepseek-llm", PreTokenizerKind::kDeepseekLlm},
      {"deepseek-coder", PreTokenizerKind::kDeepseekCoder},
      {"falcon", PreTokenizerKind::kFalcon},
      {"starcoder", PreTokenizerKind::kStarcoder},
      {"refact", PreTokenizerKind::kStarcoder},
      {"smollm", PreTokenizerKind::kStarcoder},
  };
  for (const NameAndKind& entry : kNames) {
    if (entry.name == pre) return entry.kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported tokenizer.ggml.pre '", std::string(pre), "'"));
}

const std::vector<std::string>& PreTokenizerRegexes(PreTokenizerKind kind) {
  return RegexesFor(kind);
}

// One compiled pattern. `$` means end of subject only (as in the ECMAScript
// regexes llama.cpp runs), not "before a final newline".
class PreTokenizer::CompiledRegex {
 public:
  static absl::StatusOr<std::unique_ptr<const CompiledRegex>> Compile(
      const std::string& pattern) {
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code = pcre2_compile(
        reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
        PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error_code, &error_offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error_code, message, sizeof(message));
      return absl::InternalError(absl::StrCat("pre-tokenizer regex '", pattern,
                                              "' does not compile at offset ", error_offset,
                                              ": ", reinterpret_cast<const char*>(message)));
    }
    return std::unique_ptr<const CompiledRegex>(new CompiledRegex(code));
  }

  ~CompiledRegex() { pcre2_code_free(code_); }
  CompiledRegex(const CompiledRegex&) = delete;
  CompiledRegex& operator=(const CompiledRegex&) = delete;

  // Appends the matches of this pattern in `piece`, and the unmatched gaps
  // between them, to `out`. `piece` must be valid UTF-8.
  void SplitPiece(std::string_view piece, pcre2_match_data* match_data,
                  std::vector<std::string_view>* out) const {
    const auto subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    size_t gap_start = 0;
    size_t search_from = 0;
    while (search_from < piece.size()) {
      const int rc = pcre2_match(code_, subject, piece.size(), search_from, PCRE2_NO_UTF_CHECK,
                                 match_data, nullptr);
      // No match, or a resource limit: the rest of the piece stays whole.
      if (rc < 0) break;
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);
      const size_t match_start = ovector[0];
      const size_t match_end = ovector[1];
      if (match_end == match_start) {
        // None of the patterns matches empty text; never loop on it anyway.
        if (match_start >= piece.size()) break;
        search_from =
            match_start + utf8::LeadByteLength(static_cast<uint8_t>(piece[match_start]));
        continue;
      }
      if (match_start > gap_start) out->push_back(piece.substr(gap_start, match_start - gap_start));
      out->push_back(piece.substr(match_start, match_end - match_start));
      gap_start = search_from = match_end;
    }
    if (gap_start < piece.size()) out->push_back(piece.substr(gap_start));
  }

 private:
  explicit CompiledRegex(pcre2_code* code) : code_(code) {}

  pcre2_code* code_;
};

PreTokenizer::PreTokenizer(PreTokenizerKind kind) : kind_(kind) {}
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

absl::StatusOr<PreTokenizer> PreTokenizer::Create(PreTokenizerKind kind) {
  PreTokenizer pre_tokenizer(kind);
  for (const std::string& pattern : RegexesFor(kind)) {
    absl::StatusOr<std::unique_ptr<const CompiledRegex>> regex = CompiledRegex::Compile(pattern);
    if (!regex.ok()) return regex.status();
    pre_tokenizer.regexes_.push_back(*std::move(regex));
  }
  return pre_tokenizer;
}

std::vector<std::string_view> PreTokenizer::Split(std::string_view text) const {
  if (text.empty()) return {};
  std::vector<std::string_view> pieces = {text};
  if (!IsValidUtf8(text)) return pieces;

  // Matching state for this call only: the compiled patterns are shared.
  MatchData match_data(pcre2_match_data_create(1, nullptr));
  if (match_data == nullptr) return pieces;  // out of memory: one piece
  std::vector<std::string_view> next;
  for (const auto& regex : regexes_) {
    next.clear();
    next.reserve(pieces.size() * 2);
    for (std::string_view piece : pieces) regex->SplitPiece(piece, match_data.get(), &next);
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace kvs
