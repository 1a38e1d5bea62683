// libFuzzer target: decoding a stored session or checkpoint record (bytes
// read from disk: cache/record_codec.h) and checking its invariants
// (cache/record_validation.h).
//
// A fuzzer cannot forge checksums, so the input is framed here with its
// correct CRC-32C and goes through the store's own decoder: the record
// parse and CheckSessionRecord must reject or accept without reading out
// of bounds, and without protobuf's parser logging a string field of
// invalid UTF-8 (the codec's walk refuses those first:
// fuzz/protobuf_utf8_log.h traps on such a line).
#include <cstdint>
#include <string>

#include "cache/crc32c.h"
#include "cache/record_codec.h"
#include "cache/record_validation.h"
#include "cache/session_record.pb.h"
#include "fuzz/protobuf_utf8_log.h"

namespace {

template <typename Record>
bool Decode(const uint8_t* data, size_t size, Record* record) {
  const uint32_t crc = kvs::Crc32c(data, size);
  std::string value(4, '\0');
  for (int i = 0; i < 4; ++i) value[i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  value.append(reinterpret_cast<const char*>(data), size);
  return kvs::DecodeRecordValue(value, record).ok();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool trap_utf8_log = (kvs::fuzz::TrapOnProtobufUtf8Log("session_record_fuzz"), true);
  (void)trap_utf8_log;
  kvs::SessionRecord session;
  if (Decode(data, size, &session)) {
    (void)kvs::FromGeometryRecord(session.geometry());
    (void)kvs::CheckSessionRecord(session);
  }
  kvs::CheckpointRecord checkpoint;
  if (Decode(data, size, &checkpoint)) (void)kvs::CheckSessionRecord(checkpoint.session());
  return 0;
}
