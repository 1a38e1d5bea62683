// PreTokenizer: the regex lists per `tokenizer.ggml.pre` family and the
// splitting loop over PCRE2 (UTF + UCP mode, so \p{L}, \p{N}, \p{P} and \s
// follow Unicode). Before compiling, \p{L}, \p{N}, \p{P} are extended to
// Unicode 15 and \s becomes the White_Space property (model/unicode_classes.h),
// as Hugging Face's tokenizers classify. See model/pretokenizer.h for the
// contract.
#include "model/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/tokenizer.h"
#include "model/unicode_classes.h"
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
constexpr char kLlama3Regex[] = R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|)"
                                R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|)"
                                R"(\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2/Qwen3: as Llama 3 but every digit is its own piece.
constexpr char kQwen2Regex[] = R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|)"
                               R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|)"
                               R"(\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek LLM's letter class (cased letters of Latin, Greek, Cyrillic,
// Armenian, Georgian, Cherokee, Glagolitic, Coptic, Deseret, Osage, Old
// Hungarian, Warang Citi, Adlam, ...), as listed in its tokenizer.json.
// Written with \x{...} escapes: several of its characters (e.g. U+1F7D,
// U+1FD3, U+2126 OHM SIGN, U+212A KELVIN SIGN) have singleton canonical
// decompositions, so a literal copy is not safe from Unicode normalization.
constexpr char kDeepseekLetters[] =
    R"(\s?[)"
    R"(A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF})"
    R"(\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}-\x{377}\x{37B}-\x{37D})"
    R"(\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5})"
    R"(\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5})"
    R"(\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15})"
    R"(\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59})"
    R"(\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE})"
    R"(\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB})"
    R"(\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128})"
    R"(\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149})"
    R"(\x{214E}\x{2183}-\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE})"
    R"(\x{2CF2}-\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
    R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06})"
    R"(\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F})"
    R"(\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
    R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943})"
    R"(]+)";

// DeepSeek's CJK run: CJK ideographs (U+4E00..U+9FA5), everything from
// U+0800 up to them, and Hangul syllables (U+AC00..U+D7FF).
constexpr char kCjkRun[] = R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

// DeepSeek's punctuation run: ASCII punctuation, its fullwidth forms,
// quotation marks U+2018..U+201F and U+3000..U+3002 (ideographic space,
// comma, full stop).
constexpr char kDeepseekPunctuation[] =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";

// DeepSeek-LLM's `\s+$`, the whitespace at the end of a piece. Written
// with `(?<!\s)` in front, which matches exactly the same text (the match
// always starts where the trailing run starts) but makes PCRE2 reject each
// start inside a run at once: as published, every start position inside a
// long run that does not reach the end read the run to its end, quadratic
// in the run (20,000 spaces then "1": seconds).
constexpr char kTrailingWhitespace[] = R"((?<!\s)\s+$)";

const std::vector<std::string>& RegexesFor(PreTokenizerKind kind) {
  static const auto* const kLists = new std::array<std::vector<std::string>, 8>{{
      /*kDefault=*/{R"([\p{P}\$\+<=>\^~\|]+)", kGpt2Regex, R"(\p{N}+)", "[0-9][0-9][0-9]"},
      /*kGpt2=*/{kGpt2Regex},
      /*kLlama3=*/{kLlama3Regex},
      /*kQwen2=*/{kQwen2Regex},
      /*kDeepseekLlm=*/
      {"[\r\n]", kDeepseekLetters, kDeepseekPunctuation, kTrailingWhitespace, kCjkRun, R"(\p{N}+)"},
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

struct MatchContextDeleter {
  void operator()(pcre2_match_context* context) const { pcre2_match_context_free(context); }
};
using MatchContext = std::unique_ptr<pcre2_match_context, MatchContextDeleter>;

// What a counting PreTokenizer's callout keeps for one Split.
struct MatcherSteps {
  uint64_t steps = 0;
  size_t last_position = 0;  // of the last callout in this match attempt
};

// The callout of a counting PreTokenizer, called before every pattern item:
// one step for the item, plus one per subject code unit the matcher moved
// over since the last callout of this attempt (forward, or back when it
// backtracks), so an item that swallows a whole run (a possessive or
// atomic repeat, which calls out only once) counts the run too. Matching
// goes on.
int CountMatcherStep(pcre2_callout_block* block, void* data) {
  auto* counter = static_cast<MatcherSteps*>(data);
  if ((block->callout_flags & PCRE2_CALLOUT_STARTMATCH) != 0) {
    counter->last_position = block->start_match;
  }
  const size_t position = block->current_position;
  counter->steps += 1 + (position >= counter->last_position ? position - counter->last_position
                                                            : counter->last_position - position);
  counter->last_position = position;
  return 0;
}

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
      absl::StrCat("unsupported tokenizer.ggml.pre ", QuoteGgufString(pre)));
}

const std::vector<std::string>& PreTokenizerRegexes(PreTokenizerKind kind) {
  return RegexesFor(kind);
}

// One compiled pattern. `$` means end of subject only (as in the ECMAScript
// regexes llama.cpp runs), not "before a final newline".
class PreTokenizer::CompiledRegex {
 public:
  // Compiles `published` with its Unicode classes rewritten to Unicode 15
  // and the White_Space property (model/unicode_classes.h).
  // With `auto_callout`, the matcher calls out before every item (for
  // counting matcher steps).
  static absl::StatusOr<std::unique_ptr<const CompiledRegex>> Compile(const std::string& published,
                                                                      bool auto_callout) {
    const std::string pattern = RewriteUnicodeClasses(published);
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY |
                             (auto_callout ? PCRE2_AUTO_CALLOUT : 0u);
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     options, &error_code, &error_offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error_code, message, sizeof(message));
      return absl::InternalError(absl::StrCat("pre-tokenizer regex '", published,
                                              "' does not compile at offset ", error_offset, ": ",
                                              reinterpret_cast<const char*>(message)));
    }
    return std::unique_ptr<const CompiledRegex>(new CompiledRegex(code));
  }

  ~CompiledRegex() { pcre2_code_free(code_); }
  CompiledRegex(const CompiledRegex&) = delete;
  CompiledRegex& operator=(const CompiledRegex&) = delete;

  // Appends the matches of this pattern in `piece`, and the unmatched gaps
  // between them, to `out`. `piece` must be valid UTF-8. `match_context`
  // may be null (PCRE2's defaults).
  void SplitPiece(std::string_view piece, pcre2_match_data* match_data,
                  pcre2_match_context* match_context, std::vector<std::string_view>* out) const {
    const auto subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    size_t gap_start = 0;
    size_t search_from = 0;
    while (search_from < piece.size()) {
      const int rc = pcre2_match(code_, subject, piece.size(), search_from, PCRE2_NO_UTF_CHECK,
                                 match_data, match_context);
      // No match, or a resource limit: the rest of the piece stays whole.
      if (rc < 0) break;
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);
      const size_t match_start = ovector[0];
      const size_t match_end = ovector[1];
      if (match_end == match_start) {
        // None of the patterns matches empty text; never loop on it anyway.
        if (match_start >= piece.size()) break;
        search_from = match_start + utf8::LeadByteLength(static_cast<uint8_t>(piece[match_start]));
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

PreTokenizer::PreTokenizer(PreTokenizerKind kind, bool counts_matcher_steps)
    : kind_(kind), counts_matcher_steps_(counts_matcher_steps) {}
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

absl::StatusOr<PreTokenizer> PreTokenizer::Create(PreTokenizerKind kind) {
  return Compile(kind, /*counts_matcher_steps=*/false);
}

absl::StatusOr<PreTokenizer> PreTokenizer::CreateCountingMatcherSteps(PreTokenizerKind kind) {
  return Compile(kind, /*counts_matcher_steps=*/true);
}

absl::StatusOr<PreTokenizer> PreTokenizer::CreateCountingMatcherStepsOfPatterns(
    const std::vector<std::string>& patterns) {
  return Compile(PreTokenizerKind::kDefault, /*counts_matcher_steps=*/true, &patterns);
}

absl::StatusOr<PreTokenizer> PreTokenizer::Compile(PreTokenizerKind kind, bool counts_matcher_steps,
                                                   const std::vector<std::string>* patterns) {
  PreTokenizer pre_tokenizer(kind, counts_matcher_steps);
  for (const std::string& pattern : patterns != nullptr ? *patterns : RegexesFor(kind)) {
    absl::StatusOr<std::unique_ptr<const CompiledRegex>> regex =
        CompiledRegex::Compile(pattern, counts_matcher_steps);
    if (!regex.ok()) return regex.status();
    pre_tokenizer.regexes_.push_back(*std::move(regex));
  }
  return pre_tokenizer;
}

std::vector<std::string_view> PreTokenizer::Split(std::string_view text) const {
  uint64_t matcher_steps = 0;
  return Split(text, &matcher_steps);
}

std::vector<std::string_view> PreTokenizer::Split(std::string_view text,
                                                  uint64_t* matcher_steps) const {
  if (text.empty()) return {};
  std::vector<std::string_view> pieces = {text};
  if (!IsValidUtf8(text)) return pieces;

  // Matching state for this call only: the compiled patterns are shared.
  MatchData match_data(pcre2_match_data_create(1, nullptr));
  if (match_data == nullptr) return pieces;  // out of memory: one piece
  MatchContext match_context;
  MatcherSteps steps;
  if (counts_matcher_steps_) {
    match_context.reset(pcre2_match_context_create(nullptr));
    if (match_context == nullptr) return pieces;  // out of memory: one piece
    pcre2_set_callout(match_context.get(), CountMatcherStep, &steps);
  }
  std::vector<std::string_view> next;
  for (const auto& regex : regexes_) {
    next.clear();
    next.reserve(pieces.size() * 2);
    for (std::string_view piece : pieces) {
      regex->SplitPiece(piece, match_data.get(), match_context.get(), &next);
    }
    pieces.swap(next);
  }
  *matcher_steps += steps.steps;
  return pieces;
}

}  // namespace kvs
