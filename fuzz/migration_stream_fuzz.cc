// libFuzzer target: the migration stream reader (cache/migration_stream.h)
// on bytes a client sends to ImportSession.
//
// DecodeMigrationStream must reject the bytes or read them without reading
// past them; what it accepts must write back (MigrationStreamWriter) to a
// stream that reads back to the same record and pages.
#include <cstdint>
#include <string>
#include <string_view>

#include "cache/migration_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
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
