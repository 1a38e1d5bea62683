// Migration stream: one session or one checkpoint, with the KV pages it
// references, as a self-describing, versioned, checksummed byte string
// (docs/storage-format.md, section 12). ExportSession sends it in chunks,
// ImportSession reads it back on another server; it can also be kept in a
// file.
//
//   header  "KVSM", u32 version (1), u32 CRC-32C of those 8 bytes
//   frames  u32 kind, u64 payload length, payload, u32 CRC-32C of the
//           kind, length and payload bytes
//             kind 1  session record     (serialized SessionRecord)
//             kind 2  checkpoint record  (serialized CheckpointRecord)
//             kind 3  page               (16-byte page hash, encoded page
//                                          exactly as the store keeps it)
//             kind 4  end                (u64 records, u64 pages,
//                                          u64 offset of this frame,
//                                          SHA-256 of bytes [0, offset))
//
// Exactly one record frame comes first, then its pages, then the end
// frame, then nothing. The pages are those of the record's page_hashes
// that the writer was not told to omit, each at most once; records and
// pages reuse the store's own encodings (cache/session_record.proto,
// cache/page_codec.h), so an importer checks them with the store's checks.
//
// Pure functions and a value type; thread-compatible.
#ifndef KVSESSION_CACHE_MIGRATION_STREAM_H_
#define KVSESSION_CACHE_MIGRATION_STREAM_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "cache/page_hash.h"
#include "cache/session_record.pb.h"

namespace kvs {

inline constexpr uint32_t kMigrationMagic = 0x4D53564Bu;  // bytes "KVSM"
inline constexpr uint32_t kMigrationVersion = 1;
inline constexpr size_t kMigrationHeaderBytes = 12;

enum class MigrationFrame : uint32_t { kSession = 1, kCheckpoint = 2, kPage = 3, kEnd = 4 };

// Builds a stream in memory: the header at construction, then one
// SetSession or SetCheckpoint, then AddPage per page, then Finish.
class MigrationStreamWriter {
 public:
  MigrationStreamWriter();
  void SetSession(const SessionRecord& record);
  void SetCheckpoint(const CheckpointRecord& record);
  void AddPage(const PageHash& hash, std::string_view encoded_page);
  // Appends the end frame and returns the whole stream.
  std::string Finish() &&;
  size_t size() const { return bytes_.size(); }
  int64_t pages() const { return pages_; }

 private:
  void AddFrame(MigrationFrame kind, std::string_view payload);
  std::string bytes_;
  int64_t records_ = 0;
  int64_t pages_ = 0;
};

// What a stream holds.
struct MigrationContents {
  std::optional<SessionRecord> session;        // exactly one of these two
  std::optional<CheckpointRecord> checkpoint;
  absl::flat_hash_map<PageHash, std::string> pages;  // hash -> encoded page
  // The session record (the checkpoint's session for a checkpoint).
  const SessionRecord& record() const { return session ? *session : checkpoint->session(); }
};

// Checks and reads a whole stream. DATA_LOSS naming the first problem:
// wrong magic, header checksum, a frame's checksum or length, a truncated
// stream (no end frame), bytes after it, a record that does not parse (a
// string field of invalid UTF-8 is named, and never reaches the parser,
// which would log it), no record or two, a page frame before the record, a
// page that fails its own checks (cache/page_codec.h CheckEncodedPage), is
// not one the record lists, or comes twice, end-frame counts or stream
// checksum that do not match. FAILED_PRECONDITION for an intact header of
// another version.
// Record invariants (cache/record_validation.h) are the store's to check.
// Messages never quote stream bytes.
absl::StatusOr<MigrationContents> DecodeMigrationStream(std::string_view bytes);

}  // namespace kvs

#endif  // KVSESSION_CACHE_MIGRATION_STREAM_H_
