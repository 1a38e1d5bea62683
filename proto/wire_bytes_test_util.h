// Test helper: protobuf wire bytes built by hand, so tests can send what a
// protobuf library would refuse to serialize (invalid UTF-8 in a string
// field, malformed framing).
#ifndef KVSESSION_PROTO_WIRE_BYTES_TEST_UTIL_H_
#define KVSESSION_PROTO_WIRE_BYTES_TEST_UTIL_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace kvs::wire {

inline std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

// A length-delimited field: a string, bytes, sub-message or map entry.
inline std::string Len(int field, absl::string_view payload) {
  return Varint((static_cast<uint64_t>(field) << 3) | 2) + Varint(payload.size()) + std::string(payload);
}

inline std::string VarintField(int field, uint64_t value) {
  return Varint(static_cast<uint64_t>(field) << 3) + Varint(value);
}

// One entry of a map<string, string> field.
inline std::string MapEntry(int field, absl::string_view key, absl::string_view value) {
  return Len(field, Len(1, key) + Len(2, value));
}

}  // namespace kvs::wire

#endif  // KVSESSION_PROTO_WIRE_BYTES_TEST_UTIL_H_
