// UTF-8 helpers shared by the tokenizers: sequence scanning, code point
// decoding/encoding, and the definitions of IsValidUtf8 and
// Utf8StreamDecoder (declared in model/tokenizer.h).
//
// Contract: every function takes arbitrary bytes and never reads outside the
// given string_view. "Valid" means well-formed UTF-8 as defined by the
// Unicode standard: no overlong forms, no surrogates (U+D800..U+DFFF), no
// code points above U+10FFFF. Invalid input is reported, never "fixed"
// silently, except where a function says it substitutes U+FFFD.
//
// Ownership: stateless free functions; nothing here allocates except the
// functions that append to a caller-owned std::string.
#ifndef KVSESSION_MODEL_UTF8_H_
#define KVSESSION_MODEL_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvs::utf8 {

// U+FFFD REPLACEMENT CHARACTER, encoded.
inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

// What the bytes at one position of a string are.
struct Sequence {
  enum class Kind {
    kValid,      // a complete, well-formed character of `length` bytes
    kTruncated,  // a well-formed prefix that runs into the end of the input
    kInvalid,    // `length` bytes (>= 1) that can never start a character
  };
  Kind kind;
  size_t length;
};

// Classifies the bytes of `s` starting at `pos` (pos < s.size()). For
// kInvalid, `length` is the "maximal subpart" of the Unicode standard: the
// longest prefix that could have started a character (at least one byte),
// which is replaced by exactly one U+FFFD.
Sequence ScanSequence(std::string_view s, size_t pos);

// The number of bytes a character starting with `lead` claims by its high
// bits alone (1 for ASCII and for stray continuation bytes, 2..4 otherwise).
// This is the permissive split llama.cpp uses to walk text character by
// character; it never returns 0.
size_t LeadByteLength(uint8_t lead);

// Decodes the character at s[*pos] and advances *pos past it. Requires a
// kValid sequence at *pos (callers check first).
char32_t DecodeValid(std::string_view s, size_t* pos);

// Appends the UTF-8 encoding of `cp` (cp <= U+10FFFF, not a surrogate).
void AppendCodePoint(char32_t cp, std::string* out);

}  // namespace kvs::utf8

#endif  // KVSESSION_MODEL_UTF8_H_
