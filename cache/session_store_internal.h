// Helpers private to the three files of SessionStore's implementation
// (session_store.cc, session_store_write.cc, session_store_read.cc): not
// part of the store's interface; nothing else includes this header.
#ifndef KVSESSION_CACHE_SESSION_STORE_INTERNAL_H_
#define KVSESSION_CACHE_SESSION_STORE_INTERNAL_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#include "rocksdb/status.h"

#include "cache/page_hash.h"
#include "cache/record_codec.h"
#include "cache/record_validation.h"
#include "cache/session_record.pb.h"
#include "proto/bounded_quote.h"

namespace kvs {
namespace session_store_internal {

inline absl::Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  std::string message = absl::StrCat(std::string(what), ": ", s.ToString());
  if (s.IsNotFound()) return absl::NotFoundError(message);
  if (s.IsCorruption()) return absl::DataLossError(message);
  if (s.IsNoSpace()) return absl::ResourceExhaustedError(message);
  if (s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) return absl::UnavailableError(message);
  if (s.IsInvalidArgument() || s.IsNotSupported()) return absl::FailedPreconditionError(message);
  return absl::InternalError(message);
}

inline const SessionRecord& SessionOf(const SessionRecord& r) { return r; }
inline const SessionRecord& SessionOf(const CheckpointRecord& r) { return r.session(); }

// Decodes and checks one stored record and gives the pages it references.
// A record that parses but breaks an invariant still gives every 16-byte
// hash it lists, so a damaged record never lets its pages be collected.
// `pages` gets the verified pages, or for a damaged record just its hashes.
template <typename Record>
absl::Status ReadRecord(std::string_view key, std::string_view value, Record* record,
                        VerifiedPages* pages) {
  *pages = VerifiedPages();
  if (absl::Status s = DecodeRecordValue(value, record); !s.ok()) return s;
  absl::Status problem;
  if (record->id() != key) {
    problem = absl::DataLossError(
        absl::StrCat("record of id ", Quote(record->id()), " stored under ",
                     Quote(absl::string_view(key.data(), key.size()))));
  } else {
    absl::StatusOr<VerifiedPages> verified =
        VerifySessionRecord(SessionOf(*record), nullptr, nullptr);
    if (verified.ok()) {
      *pages = *std::move(verified);
      return absl::OkStatus();
    }
    problem = absl::DataLossError(absl::StrCat("record ", Quote(record->id()), ": ",
                                               std::string(verified.status().message())));
  }
  for (const std::string& h : SessionOf(*record).page_hashes()) {
    if (std::optional<PageHash> hash = PageHash::FromBytes(h)) pages->hashes.push_back(*hash);
  }
  return problem;
}

}  // namespace session_store_internal
}  // namespace kvs

#endif  // KVSESSION_CACHE_SESSION_STORE_INTERNAL_H_
