// Unicode classes and NFC from ICU; see model/unicode_classes.h.
#include "model/unicode_classes.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/normalizer2.h>
#include <unicode/uniset.h>
#include <unicode/unistr.h>

#include <array>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/tokenizer.h"

namespace kvs {
namespace {

// The members of an ICU set as the body of a PCRE2 class ("\x{..}-\x{..}...").
// An invalid set pattern (a bug) gives an empty body.
std::string ClassBody(const char* icu_set_pattern) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::UnicodeSet set(icu::UnicodeString::fromUTF8(icu_set_pattern), status);
  if (U_FAILURE(status)) return "";
  std::string body;
  for (int32_t i = 0; i < set.getRangeCount(); ++i) {
    const UChar32 start = set.getRangeStart(i);
    const UChar32 end = set.getRangeEnd(i);
    absl::StrAppendFormat(&body, "\\x{%X}", start);
    if (end != start) absl::StrAppendFormat(&body, "-\\x{%X}", end);
  }
  return body;
}

// "major.minor" of the Unicode version PCRE2's tables carry, e.g. "14.0".
std::string Pcre2UnicodeVersion() {
  std::array<char, 32> version{};
  if (pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, version.data()) < 0) return "0.0";
  std::string text(version.data());
  const size_t first_dot = text.find('.');
  const size_t second_dot =
      first_dot == std::string::npos ? std::string::npos : text.find('.', first_dot + 1);
  return second_dot == std::string::npos ? text : text.substr(0, second_dot);
}

// What a rewritten escape stands for inside a class (without brackets).
struct RewrittenClasses {
  std::string letters;      // \p{L}
  std::string numbers;      // \p{N}
  std::string punctuation;  // \p{P}
  std::string white_space;  // \s

  static const RewrittenClasses& Get() {
    static const RewrittenClasses* const kClasses = [] {
      // ICU's [:age=V:] is every code point assigned in version V or earlier.
      const std::string known = absl::StrCat("[:age=", Pcre2UnicodeVersion(), ":]");
      auto* classes = new RewrittenClasses;
      classes->letters = absl::StrCat(R"(\p{L})", ClassBody(absl::StrCat("[[:L:]-", known, "]").c_str()));
      classes->numbers = absl::StrCat(R"(\p{N})", ClassBody(absl::StrCat("[[:N:]-", known, "]").c_str()));
      classes->punctuation =
          absl::StrCat(R"(\p{P})", ClassBody(absl::StrCat("[[:P:]-", known, "]").c_str()));
      classes->white_space = ClassBody("[:White_Space:]");
      return classes;
    }();
    return *kClasses;
  }
};

}  // namespace

std::string RewriteUnicodeClasses(std::string_view pattern) {
  const RewrittenClasses& classes = RewrittenClasses::Get();
  std::string out;
  out.reserve(pattern.size() * 2);
  bool in_class = false;
  for (size_t pos = 0; pos < pattern.size();) {
    const char c = pattern[pos];
    if (c != '\\' || pos + 1 >= pattern.size()) {
      if (c == '[' && !in_class) {
        in_class = true;
      } else if (c == ']' && in_class) {
        in_class = false;
      }
      out.push_back(c);
      ++pos;
      continue;
    }
    const std::string_view rest = pattern.substr(pos);
    const std::string* body = nullptr;
    size_t length = 2;
    if (rest.substr(0, 5) == R"(\p{L})") {
      body = &classes.letters;
      length = 5;
    } else if (rest.substr(0, 5) == R"(\p{N})") {
      body = &classes.numbers;
      length = 5;
    } else if (rest.substr(0, 5) == R"(\p{P})") {
      body = &classes.punctuation;
      length = 5;
    } else if (rest[1] == 's') {
      body = &classes.white_space;
    } else if (rest[1] == 'S' && !in_class) {
      absl::StrAppend(&out, "[^", classes.white_space, "]");
      pos += 2;
      continue;
    }
    if (body == nullptr) {  // any other escape: copy it whole
      out.append(rest.substr(0, 2));
      pos += 2;
      continue;
    }
    if (in_class) {
      out.append(*body);
    } else {
      absl::StrAppend(&out, "[", *body, "]");
    }
    pos += length;
  }
  return out;
}

std::string NormalizeNfc(std::string_view text) {
  bool ascii = true;  // ASCII text is always NFC: skip ICU
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii || !IsValidUtf8(text)) return std::string(text);
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) return std::string(text);
  const icu::UnicodeString input = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  if (nfc->isNormalized(input, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  const icu::UnicodeString normalized = nfc->normalize(input, status);
  if (U_FAILURE(status)) return std::string(text);
  std::string out;
  normalized.toUTF8String(out);
  return out;
}

}  // namespace kvs
