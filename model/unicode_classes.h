// Unicode character classes and normalization from ICU (Debian's libicu, ICU
// 72 = Unicode 15), for the BPE pre-tokenizer and the vocabularies whose
// Hugging Face tokenizer normalizes text to NFC.
//
// Why: the pre-tokenizer regexes run on PCRE2, whose Unicode tables in
// Debian 12 (PCRE2 10.42) are Unicode 14, and whose \s also matches U+180E
// MONGOLIAN VOWEL SEPARATOR (no longer whitespace since Unicode 6.3). Hugging
// Face's tokenizers classify with Unicode 15 and the White_Space property.
// RewriteUnicodeClasses() translates a published pattern into one PCRE2
// matches the same way: \p{L}, \p{N}, \p{P} gain the code points assigned
// after PCRE2's Unicode version (from ICU), and \s / \S become the explicit
// White_Space set / its complement.
//
// Contract: pure functions; inputs need not be valid UTF-8 (NormalizeNfc
// returns invalid input unchanged). Thread-safe: ICU's sets and normalizer
// are built once and are immutable.
#ifndef KVSESSION_MODEL_UNICODE_CLASSES_H_
#define KVSESSION_MODEL_UNICODE_CLASSES_H_

#include <string>
#include <string_view>

namespace kvs {

// `pattern` (PCRE2 syntax, UTF mode) with its Unicode classes rewritten as
// described above; the rest of the pattern is copied unchanged. Handles the
// escapes the pre-tokenizer regexes use, inside and outside [...] classes;
// \S inside a class is left as is (no regex here uses it).
std::string RewriteUnicodeClasses(std::string_view pattern);

// `text` in Unicode Normalization Form C (ICU's NFC normalizer), or `text`
// unchanged when it is not valid UTF-8 or already NFC.
std::string NormalizeNfc(std::string_view text);

}  // namespace kvs

#endif  // KVSESSION_MODEL_UNICODE_CLASSES_H_
