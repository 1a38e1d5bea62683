// FindInvalidUtf8Field: which string field of a serialized protobuf message
// holds bytes that are not valid UTF-8, found by walking the wire format
// with the message type's Descriptor.
//
// proto3 `string` fields must be valid UTF-8: protobuf's parser rejects a
// message whose string field (at any depth, map keys and values included)
// is not, says only "parse failed", and logs an ERROR line for each one it
// meets, so hostile bytes would buy a log line per call. This walk names the
// field first, so the caller refuses the bytes before they are parsed, with
// a useful message that never echoes them: the service's requests
// (INVALID_ARGUMENT, service/request_parser.h) and the store's records,
// read from disk or carried by a migration stream into ImportSession
// (DATA_LOSS, cache/record_codec.h's ParseRecord).
//
// It checks exactly what the parser checks: fields the Descriptor declares
// as `string` that arrive length-delimited, using protobuf's own UTF-8
// validator; sub-messages and map entries are walked recursively (within
// protobuf's recursion limit); unknown fields and fields with another wire
// type are skipped, as the parser keeps them as unknown fields.
//
// Pure function; thread-safe.
#ifndef KVSESSION_PROTO_UTF8_FIELD_FINDER_H_
#define KVSESSION_PROTO_UTF8_FIELD_FINDER_H_

#include <optional>
#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/zero_copy_stream.h>

#include "absl/strings/string_view.h"

namespace kvs {

// What the walk over a serialized message found.
struct StringFieldWalk {
  // The first string field with invalid UTF-8 (as FindInvalidUtf8Field).
  std::optional<std::string> invalid_utf8;
  // The bytes stopped being a well-formed message before the walk ended
  // (a truncated or overlong field, a bad length, a sub-message that does
  // not end cleanly, nesting past protobuf's recursion limit): protobuf's
  // parser rejects them too.
  bool malformed = false;
};
// Walks every field of the message of `type` in `input` (consumed), or in
// `bytes` (at most INT_MAX of them). A caller about to parse the bytes must
// refuse malformed ones as well as invalid_utf8 ones without parsing them:
// protobuf's parser checks, and logs, a string field cut short by the end
// before it rejects the message (the session-record fuzzer's finding).
StringFieldWalk WalkStringFields(const google::protobuf::Descriptor& type,
                                 google::protobuf::io::ZeroCopyInputStream* input);
StringFieldWalk WalkStringFields(const google::protobuf::Descriptor& type, absl::string_view bytes);

// The first string field with invalid UTF-8 in the message of `type`
// serialized in `input`, as a path from the message and what is wrong:
//   "session_id is not valid UTF-8"
//   "stop[1] is not valid UTF-8"                 (repeated: the index)
//   "labels: a key is not valid UTF-8"           (maps: key or value)
//   "labels: a value is not valid UTF-8"
//   "input.text is not valid UTF-8"              (sub-messages: dotted)
// nullopt when every string field is valid UTF-8, and also when the bytes
// stop being a well-formed message before a bad string field is reached
// (so before parsing, use WalkStringFields, which says so). The
// description holds field names from the schema and numbers only, never
// input bytes. Consumes `input`.
std::optional<std::string> FindInvalidUtf8Field(const google::protobuf::Descriptor& type,
                                                google::protobuf::io::ZeroCopyInputStream* input);
std::optional<std::string> FindInvalidUtf8Field(const google::protobuf::Descriptor& type,
                                                absl::string_view bytes);

}  // namespace kvs

#endif  // KVSESSION_PROTO_UTF8_FIELD_FINDER_H_
