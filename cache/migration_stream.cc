#include "cache/migration_stream.h"

#include <openssl/sha.h>

#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cache/crc32c.h"
#include "cache/page_codec.h"
#include "cache/record_codec.h"

namespace kvs {
namespace {

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

constexpr size_t kFrameHeadBytes = 12;  // u32 kind, u64 length
constexpr size_t kFrameCrcBytes = 4;
constexpr size_t kEndPayloadBytes = 24 + SHA256_DIGEST_LENGTH;

// SHA-256 of `bytes`: the stream checksum. Not a CRC: a CRC over frames
// that each end in their own CRC does not change when two frames of the
// same length swap places.
std::string Sha256Of(std::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof digest);
}

absl::Status Corrupt(std::string_view what) {
  return absl::DataLossError(absl::StrCat("migration stream: ", std::string(what)));
}

}  // namespace

MigrationStreamWriter::MigrationStreamWriter() {
  PutU32(&bytes_, kMigrationMagic);
  PutU32(&bytes_, kMigrationVersion);
  PutU32(&bytes_, Crc32c(bytes_.data(), bytes_.size()));
}

void MigrationStreamWriter::AddFrame(MigrationFrame kind, std::string_view payload) {
  const size_t start = bytes_.size();
  PutU32(&bytes_, static_cast<uint32_t>(kind));
  PutU64(&bytes_, payload.size());
  bytes_.append(payload);
  PutU32(&bytes_, Crc32c(bytes_.data() + start, bytes_.size() - start));
}

void MigrationStreamWriter::SetSession(const SessionRecord& record) {
  AddFrame(MigrationFrame::kSession, record.SerializeAsString());
  ++records_;
}

void MigrationStreamWriter::SetCheckpoint(const CheckpointRecord& record) {
  AddFrame(MigrationFrame::kCheckpoint, record.SerializeAsString());
  ++records_;
}

void MigrationStreamWriter::AddPage(const PageHash& hash, std::string_view encoded_page) {
  std::string payload(hash.view());
  payload.append(encoded_page);
  AddFrame(MigrationFrame::kPage, payload);
  ++pages_;
}

std::string MigrationStreamWriter::Finish() && {
  const uint64_t offset = bytes_.size();
  std::string end;
  PutU64(&end, static_cast<uint64_t>(records_));
  PutU64(&end, static_cast<uint64_t>(pages_));
  PutU64(&end, offset);
  end.append(Sha256Of(bytes_));
  AddFrame(MigrationFrame::kEnd, end);
  return std::move(bytes_);
}

absl::StatusOr<MigrationContents> DecodeMigrationStream(std::string_view bytes) {
  if (bytes.size() < kMigrationHeaderBytes) return Corrupt("shorter than its 12-byte header");
  if (GetU32(bytes.data()) != kMigrationMagic) {
    return Corrupt("does not start with \"KVSM\" (not a kvsession migration stream)");
  }
  if (GetU32(bytes.data() + 8) != Crc32c(bytes.data(), 8)) return Corrupt("header checksum mismatch");
  if (const uint32_t version = GetU32(bytes.data() + 4); version != kMigrationVersion) {
    return absl::FailedPreconditionError(absl::StrCat("migration stream version ", version,
                                                      "; this server reads version ",
                                                      kMigrationVersion));
  }
  MigrationContents out;
  absl::flat_hash_set<PageHash> listed;
  size_t pos = kMigrationHeaderBytes;
  int frame_index = 0;
  while (true) {
    const std::string frame_name = absl::StrCat("frame ", frame_index, " at byte ", pos);
    if (pos == bytes.size()) return Corrupt(absl::StrCat("truncated: no end frame after ", frame_index, " frames"));
    if (bytes.size() - pos < kFrameHeadBytes + kFrameCrcBytes) {
      return Corrupt(absl::StrCat("truncated in ", frame_name));
    }
    const uint32_t kind = GetU32(bytes.data() + pos);
    const uint64_t length = GetU64(bytes.data() + pos + 4);
    if (length > bytes.size() - pos - kFrameHeadBytes - kFrameCrcBytes) {
      return Corrupt(absl::StrCat(frame_name, ": length ", length, " runs past the end (truncated or corrupt)"));
    }
    const size_t crc_at = pos + kFrameHeadBytes + length;
    if (GetU32(bytes.data() + crc_at) != Crc32c(bytes.data() + pos, crc_at - pos)) {
      return Corrupt(absl::StrCat(frame_name, ": checksum mismatch"));
    }
    const std::string_view payload = bytes.substr(pos + kFrameHeadBytes, length);
    const bool have_record = out.session.has_value() || out.checkpoint.has_value();
    switch (static_cast<MigrationFrame>(kind)) {
      case MigrationFrame::kSession:
      case MigrationFrame::kCheckpoint: {
        if (have_record) return Corrupt(absl::StrCat(frame_name, ": a second record"));
        google::protobuf::Message* record = nullptr;
        if (kind == static_cast<uint32_t>(MigrationFrame::kSession)) {
          record = &out.session.emplace();
        } else {
          record = &out.checkpoint.emplace();
        }
        if (absl::Status parsed = ParseRecord(payload, record); !parsed.ok()) {
          return Corrupt(absl::StrCat(frame_name, ": ", parsed.message()));
        }
        for (const std::string& h : out.record().page_hashes()) {
          std::optional<PageHash> hash = PageHash::FromBytes(h);
          if (!hash) return Corrupt(absl::StrCat(frame_name, ": a page hash is not 16 bytes"));
          listed.insert(*hash);
        }
        break;
      }
      case MigrationFrame::kPage: {
        if (!have_record) return Corrupt(absl::StrCat(frame_name, ": a page before the record"));
        if (payload.size() < PageHash::kSize) return Corrupt(absl::StrCat(frame_name, ": page frame too short"));
        const PageHash hash = *PageHash::FromBytes(payload.substr(0, PageHash::kSize));
        if (!listed.contains(hash)) {
          return Corrupt(absl::StrCat(frame_name, ": page ", hash.hex(), " is not one the record lists"));
        }
        const std::string_view page = payload.substr(PageHash::kSize);
        if (absl::StatusOr<EncodedPageInfo> info = CheckEncodedPage(page); !info.ok()) {
          return Corrupt(absl::StrCat(frame_name, ": page ", hash.hex(), ": ", std::string(info.status().message())));
        }
        if (!out.pages.emplace(hash, std::string(page)).second) {
          return Corrupt(absl::StrCat(frame_name, ": page ", hash.hex(), " comes twice"));
        }
        break;
      }
      case MigrationFrame::kEnd: {
        if (length != kEndPayloadBytes) return Corrupt(absl::StrCat(frame_name, ": end frame of the wrong length"));
        const uint64_t records = GetU64(payload.data());
        const uint64_t pages = GetU64(payload.data() + 8);
        const uint64_t offset = GetU64(payload.data() + 16);
        const std::string_view digest = payload.substr(24);
        if (!have_record || records != 1 || pages != out.pages.size()) {
          return Corrupt(absl::StrCat("the end frame counts ", records, " records and ", pages,
                                      " pages; the stream holds ", have_record ? 1 : 0, " and ",
                                      out.pages.size()));
        }
        if (offset != pos || digest != Sha256Of(bytes.substr(0, pos))) {
          return Corrupt("stream checksum mismatch (frames reordered, dropped or changed)");
        }
        if (crc_at + kFrameCrcBytes != bytes.size()) {
          return Corrupt(absl::StrCat(bytes.size() - crc_at - kFrameCrcBytes, " bytes after the end frame"));
        }
        return out;
      }
      default:
        return Corrupt(absl::StrCat(frame_name, ": unknown frame kind ", kind));
    }
    pos = crc_at + kFrameCrcBytes;
    ++frame_index;
  }
}

}  // namespace kvs
