// PreTokenizer: splits text into the pieces ("words") that byte-level BPE
// merges independently, using the regex list a vocabulary's
// `tokenizer.ggml.pre` names.
//
// Contract: the regexes are the ones the models publish in their
// tokenizer.json (as llama.cpp adapts them), with character classes as
// Hugging Face's tokenizers see them: \p{L}/\p{N}/\p{P} by Unicode 15 and \s
// as the White_Space property (so not U+180E), via ICU; see
// model/unicode_classes.h. They are applied in order: each
// one splits every piece produced by the previous one into its matches and
// the unmatched gaps between them, and sees only that piece (so a lookahead
// at a piece's end sees the end of the subject). Split() returns views into
// its argument that cover it exactly, in order, with no empty piece. Input
// that is not valid UTF-8 comes back as a single piece (the regexes need
// code points; byte-level BPE still encodes it losslessly).
//
// Matcher steps: a PreTokenizer made by CreateCountingMatcherSteps() also
// counts the steps PCRE2's matcher takes: its patterns are compiled with
// PCRE2_AUTO_CALLOUT, which calls out before every pattern item (retries
// after backtracking included), and each callout counts one step plus the
// subject code units the matcher moved over since the last one (so a
// possessive repeat that swallows a run, calling out once, counts the
// run). That measures the matching work, the same on every machine and
// under any load, so tests can show that splitting stays linear in the
// input without timing it. PCRE2 keeps its optimizations with callouts,
// so the counting PreTokenizer matches as the plain one does and splits
// the same pieces; the callouts make it slower, so only tests make one.
//
// Ownership: a PreTokenizer owns its compiled PCRE2 patterns, compiled once
// by Create() (or CreateCountingMatcherSteps*()). It is immutable
// afterwards; Split() allocates its matching state per call, so one
// PreTokenizer may be shared by concurrent callers.
#ifndef KVSESSION_MODEL_PRETOKENIZER_H_
#define KVSESSION_MODEL_PRETOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kvs {

// The pre-tokenizer families this engine supports. Several `pre` names map
// to one family (e.g. "llama3" and "llama-bpe").
enum class PreTokenizerKind {
  kDefault,        // "default" or no `pre` key: llama.cpp's generic BPE list
  kGpt2,           // "gpt-2" and GPT-2-regex models (phi-2, mpt, olmo)
  kLlama3,         // "llama3", "llama-bpe", "llama-v3", "falcon3"
  kQwen2,          // "qwen2", "deepseek-r1-qwen": like Llama 3, single digits
  kDeepseekLlm,    // "deepseek-llm"
  kDeepseekCoder,  // "deepseek-coder"
  kFalcon,         // "falcon"
  kStarcoder,      // "starcoder", "refact", "smollm"
};

// The family for a `tokenizer.ggml.pre` value; an empty name means the key
// is absent (kDefault). InvalidArgument naming the value when unknown.
absl::StatusOr<PreTokenizerKind> PreTokenizerKindFromName(std::string_view pre);

// The regexes (PCRE2 syntax, UTF-8) a family applies, in order, as
// published (Create() compiles them with RewriteUnicodeClasses applied).
const std::vector<std::string>& PreTokenizerRegexes(PreTokenizerKind kind);

class PreTokenizer {
 public:
  // Compiles the family's regexes. Internal if one fails to compile (a bug:
  // the patterns are fixed).
  static absl::StatusOr<PreTokenizer> Create(PreTokenizerKind kind);
  // The same, counting matcher steps (see the top of this file).
  static absl::StatusOr<PreTokenizer> CreateCountingMatcherSteps(PreTokenizerKind kind);
  // A counting PreTokenizer of `patterns` (PCRE2 syntax, rewritten as the
  // families' are) instead of a family's, kind() kDefault: for tests of the
  // count itself. Internal if one does not compile.
  static absl::StatusOr<PreTokenizer> CreateCountingMatcherStepsOfPatterns(
      const std::vector<std::string>& patterns);

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  PreTokenizerKind kind() const { return kind_; }

  // The pieces of `text`, in order; they concatenate back to `text`.
  std::vector<std::string_view> Split(std::string_view text) const;
  // The same pieces. A counting PreTokenizer adds the steps its matcher took
  // to `*matcher_steps` (not null); any other adds nothing.
  std::vector<std::string_view> Split(std::string_view text, uint64_t* matcher_steps) const;

 private:
  class CompiledRegex;  // one PCRE2 pattern; defined in pretokenizer.cc

  PreTokenizer(PreTokenizerKind kind, bool counts_matcher_steps);
  // Compiles `*patterns`, or the family's when null.
  static absl::StatusOr<PreTokenizer> Compile(PreTokenizerKind kind, bool counts_matcher_steps,
                                              const std::vector<std::string>* patterns = nullptr);

  PreTokenizerKind kind_;
  bool counts_matcher_steps_;
  std::vector<std::unique_ptr<const CompiledRegex>> regexes_;
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_PRETOKENIZER_H_
