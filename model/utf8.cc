// UTF-8 scanning and the streaming decoder. See model/utf8.h for the
// contract; IsValidUtf8 and Utf8StreamDecoder are declared in
// model/tokenizer.h because the rest of the engine uses them with the
// tokenizer.
#include "model/utf8.h"

#include "model/tokenizer.h"

namespace kvs {
namespace utf8 {
namespace {

bool IsContinuation(uint8_t byte) { return (byte & 0xC0) == 0x80; }

// The allowed range of the second byte of a multi-byte sequence depends on
// the lead byte: this is what excludes overlongs (E0, F0), surrogates (ED)
// and code points above U+10FFFF (F4).
struct SecondByteRange {
  uint8_t low;
  uint8_t high;
};

SecondByteRange SecondByteRangeFor(uint8_t lead) {
  switch (lead) {
    case 0xE0:
      return {0xA0, 0xBF};
    case 0xED:
      return {0x80, 0x9F};
    case 0xF0:
      return {0x90, 0xBF};
    case 0xF4:
      return {0x80, 0x8F};
    default:
      return {0x80, 0xBF};
  }
}

// Length of a well-formed sequence starting with `lead`, 0 when `lead` can
// never start one (continuation bytes, C0/C1 overlong leads, F5..FF).
size_t ExpectedLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

}  // namespace

Sequence ScanSequence(std::string_view s, size_t pos) {
  const auto byte_at = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t lead = byte_at(pos);
  const size_t expected = ExpectedLength(lead);
  if (expected == 0) return {Sequence::Kind::kInvalid, 1};
  if (expected == 1) return {Sequence::Kind::kValid, 1};

  const SecondByteRange second = SecondByteRangeFor(lead);
  for (size_t i = 1; i < expected; ++i) {
    if (pos + i >= s.size()) return {Sequence::Kind::kTruncated, i};
    const uint8_t byte = byte_at(pos + i);
    const bool ok = i == 1 ? (byte >= second.low && byte <= second.high) : IsContinuation(byte);
    if (!ok) return {Sequence::Kind::kInvalid, i};
  }
  return {Sequence::Kind::kValid, expected};
}

size_t LeadByteLength(uint8_t lead) {
  static constexpr uint8_t kLengthByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1,
                                                      1, 1, 1, 1, 2, 2, 3, 4};
  return kLengthByHighNibble[lead >> 4];
}

char32_t DecodeValid(std::string_view s, size_t* pos) {
  const auto byte_at = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t lead = byte_at(*pos);
  const size_t length = ExpectedLength(lead);
  char32_t cp = length == 1 ? lead : lead & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) cp = (cp << 6) | (byte_at(*pos + i) & 0x3F);
  *pos += length;
  return cp;
}

void AppendCodePoint(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace utf8

bool IsValidUtf8(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    const utf8::Sequence seq = utf8::ScanSequence(s, pos);
    if (seq.kind != utf8::Sequence::Kind::kValid) return false;
    pos += seq.length;
  }
  return true;
}

std::string Utf8StreamDecoder::Push(std::string_view bytes) {
  pending_.append(bytes.data(), bytes.size());
  std::string complete;
  size_t pos = 0;
  while (pos < pending_.size()) {
    const utf8::Sequence seq = utf8::ScanSequence(pending_, pos);
    if (seq.kind == utf8::Sequence::Kind::kTruncated) break;
    if (seq.kind == utf8::Sequence::Kind::kValid) {
      complete.append(pending_, pos, seq.length);
    } else {
      complete.append(utf8::kReplacementCharacter);
    }
    pos += seq.length;
  }
  pending_.erase(0, pos);
  return complete;
}

std::string Utf8StreamDecoder::Finish() {
  // Whatever is held back is a truncated prefix of one character.
  std::string rest = pending_.empty() ? "" : std::string(utf8::kReplacementCharacter);
  pending_.clear();
  return rest;
}

}  // namespace kvs
