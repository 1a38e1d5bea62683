// libFuzzer target: the migration stream reader (cache/migration_stream.h)
// on bytes a client sends to ImportSession.
//
// DecodeMigrationStream must reject the bytes or read them without reading
// past them, and never hand a record of invalid UTF-8 to protobuf's parser
// (its log line is a finding: fuzz/protobuf_utf8_log.h); what it accepts
// must write back (MigrationStreamWriter) to a stream that reads back to
// the same record and pages.
#include <cstdint>
#include <string>
#include <string_view>

#include "cache/migration_stream.h"
#include "fuzz/protobuf_utf8_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool trap_utf8_log = (kvs::fuzz::TrapOnProtobufUtf8Log("migration_stream_fuzz"), true);
  (void)trap_utf8_log;
  const std::string bytes(reinterpret_cast<const char*>(data), size);  // exactly sized for ASan
  absl::StatusOr<kvs::MigrationContents> got = kvs::DecodeMigrationStream(bytes);
  if (!got.ok()) return 0;
  kvs::MigrationStreamWriter writer;
  if (got->session) {
    writer.SetSession(*got->session);
  } else {
    writer.SetCheckpoint(*got->checkpoint);
  }
  for (const auto& [hash, page] : got->pages) writer.AddPage(hash, page);
  absl::StatusOr<kvs::MigrationContents> again = kvs::DecodeMigrationStream(std::move(writer).Finish());
  if (!again.ok() || again->pages != got->pages ||
      again->record().SerializeAsString() != got->record().SerializeAsString()) {
    __builtin_trap();
  }
  return 0;
}
