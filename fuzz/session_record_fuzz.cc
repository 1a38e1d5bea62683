// libFuzzer target: decoding a stored session or checkpoint record (bytes
// read from disk) and checking its invariants (cache/snapshot_store.h).
//
// The CRC-32C framing of stored records is private to the store today, and a
// fuzzer cannot forge checksums anyway, so this feeds the bytes a record
// would carry after its checksum: the SessionRecord / CheckpointRecord parse
// and CheckSessionRecord, which must reject or accept without reading out of
// bounds. When the framing moves to cache/record_codec.h, point Decode() at
// its decoder (with the checksum computed here) and keep the rest.
#include <cstdint>

#include "cache/session_record.pb.h"
#include "cache/snapshot_store.h"

namespace {

template <typename Record>
bool Decode(const uint8_t* data, size_t size, Record* record) {
  return record->ParseFromArray(data, static_cast<int>(size));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvs::SessionRecord session;
  if (Decode(data, size, &session)) {
    (void)kvs::FromGeometryRecord(session.geometry());
    (void)kvs::CheckSessionRecord(session);
  }
  kvs::CheckpointRecord checkpoint;
  if (Decode(data, size, &checkpoint)) (void)kvs::CheckSessionRecord(checkpoint.session());
  return 0;
}
