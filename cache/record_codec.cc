#include "cache/record_codec.h"

#include <climits>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "cache/crc32c.h"
#include "proto/utf8_field_finder.h"

namespace kvs {

std::string EncodeRecordValue(const google::protobuf::MessageLite& record) {
  std::string value(kRecordCrcBytes, '\0');
  record.AppendToString(&value);
  const uint32_t crc = Crc32c(value.data() + kRecordCrcBytes, value.size() - kRecordCrcBytes);
  for (size_t i = 0; i < kRecordCrcBytes; ++i) value[i] = static_cast<char>(crc >> (8 * i));
  return value;
}

absl::Status ParseRecord(std::string_view payload, google::protobuf::Message* record) {
  if (payload.size() > static_cast<size_t>(INT_MAX)) return absl::DataLossError("the record does not parse");
  // The walk first: the parser would log each string field of invalid
  // UTF-8, even one cut short by the end of malformed bytes.
  const StringFieldWalk walk =
      WalkStringFields(*record->GetDescriptor(), absl::string_view(payload.data(), payload.size()));
  if (walk.invalid_utf8) return absl::DataLossError(absl::StrCat("the record's ", *walk.invalid_utf8));
  if (walk.malformed || !record->ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::DataLossError("the record does not parse");
  }
  return absl::OkStatus();
}

absl::Status DecodeRecordValue(std::string_view value, google::protobuf::Message* record) {
  if (value.size() < kRecordCrcBytes) {
    return absl::DataLossError(absl::StrCat("record value is ", value.size(),
                                            " bytes, shorter than its checksum"));
  }
  uint32_t stored = 0;
  for (size_t i = 0; i < kRecordCrcBytes; ++i) {
    stored |= uint32_t{static_cast<uint8_t>(value[i])} << (8 * i);
  }
  const std::string_view payload = value.substr(kRecordCrcBytes);
  if (Crc32c(payload.data(), payload.size()) != stored) {
    return absl::DataLossError("record checksum mismatch");
  }
  return ParseRecord(payload, record);
}

}  // namespace kvs
