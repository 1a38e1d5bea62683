// Record codec: how a stored record (cache/session_record.proto) is framed
// as a RocksDB value (docs/storage-format.md, "Records"):
//
//   value = CRC-32C of the serialized message (4 bytes, little-endian)
//           || the serialized message
//
// EncodeRecordValue never fails. DecodeRecordValue returns DATA_LOSS if the
// value is shorter than its checksum, the checksum does not match, or the
// payload does not parse (ParseRecord); on error `*record` may hold a
// partial parse (callers discard it). It checks framing only: what a
// record must satisfy is cache/record_validation.h's business.
//
// ParseRecord parses a record's serialized message (a stored value's
// payload, or a migration stream's record frame: cache/migration_stream.h).
// A string field of invalid UTF-8 is found by walking the bytes first
// (proto/utf8_field_finder.h) and never reaches protobuf's parser, which
// would log an ERROR line for each one: DATA_LOSS "the record's owner is
// not valid UTF-8" (the schema's field path, never the bytes). Other bytes
// that do not parse: DATA_LOSS "the record does not parse" (bytes the walk
// finds malformed are not parsed either).
//
// Pure functions, thread-safe.
#ifndef KVSESSION_CACHE_RECORD_CODEC_H_
#define KVSESSION_CACHE_RECORD_CODEC_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/message.h"

namespace kvs {

// Bytes of the checksum in front of every record value.
inline constexpr size_t kRecordCrcBytes = 4;

std::string EncodeRecordValue(const google::protobuf::MessageLite& record);
absl::Status DecodeRecordValue(std::string_view value, google::protobuf::Message* record);
absl::Status ParseRecord(std::string_view payload, google::protobuf::Message* record);

}  // namespace kvs

#endif  // KVSESSION_CACHE_RECORD_CODEC_H_
