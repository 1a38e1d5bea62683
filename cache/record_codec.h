// Record codec: how a stored record (cache/session_record.proto) is framed
// as a RocksDB value (docs/storage-format.md, "Records"):
//
//   value = CRC-32C of the serialized message (4 bytes, little-endian)
//           || the serialized message
//
// EncodeRecordValue never fails. DecodeRecordValue returns DATA_LOSS if the
// value is shorter than its checksum, the checksum does not match, or the
// payload does not parse; on error `*record` may hold a partial parse
// (callers discard it). It checks framing only: what a record must satisfy
// is cache/record_validation.h's business.
//
// Pure functions, thread-safe.
#ifndef KVSESSION_CACHE_RECORD_CODEC_H_
#define KVSESSION_CACHE_RECORD_CODEC_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/message_lite.h"

namespace kvs {

// Bytes of the checksum in front of every record value.
inline constexpr size_t kRecordCrcBytes = 4;

std::string EncodeRecordValue(const google::protobuf::MessageLite& record);
absl::Status DecodeRecordValue(std::string_view value, google::protobuf::MessageLite* record);

}  // namespace kvs

#endif  // KVSESSION_CACHE_RECORD_CODEC_H_
