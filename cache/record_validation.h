// Record validation: the invariants every SessionRecord the store holds
// satisfies (docs/storage-format.md, "Records"), and the conversions between
// KvGeometry and its record.
//
// A valid session record has a valid geometry (ValidateGeometry), 0 <=
// kv_length <= tokens, and page_hashes == ChainPageHashes(model_fingerprint,
// geometry, tokens, kv_length), chained from TenantChainStart(owner): a
// record can never name a page for other tokens. A session that slid
// (SLIDE) lists slide_salt (16 bytes) and slide_salt_page >= 0: its chain
// restarts from the salt at that page (cache/page_hash_chain.h SetSalt),
// and the check uses that chain. Every check returns INVALID_ARGUMENT
// naming the first invariant broken (the store turns it into DATA_LOSS on
// read); messages quote numbers and hashes, never the record's unbounded
// fields.
//
// Incremental verification (what lets a persist hash only its new pages):
// VerifySessionRecord returns VerifiedPages, which the store keeps per
// stored record. Given the VerifiedPages of an earlier, verified record
// (`reference`), pages in the longest common prefix of the two, i.e. with
// the same model fingerprint and geometry and, page by page, the same hash
// and the same CRC-32C of the page's tokens (PageTokensCrc), are accepted
// without SHA-256; the first page that differs and every later one are
// hashed (PageHashChain). Why this keeps the invariant: page i's hash is
// SHA-256 of (hash of page i-1, fingerprint, geometry, tokens of page i);
// the reference proved that for its own pages, and the common prefix has
// equal inputs page by page, so it holds for the new record too. The token
// comparison is by CRC-32C, which catches every change of up to 32 bits
// and misses a random one with probability 2^-32; it is not a defence
// against a forger who controls both records (record producers are the
// service's own code, clients never supply page hashes).
//
// Pure functions, thread-safe.
#ifndef KVSESSION_CACHE_RECORD_VALIDATION_H_
#define KVSESSION_CACHE_RECORD_VALIDATION_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/kv_geometry.h"
#include "cache/page_hash.h"
#include "cache/page_hash_chain.h"
#include "cache/session_record.pb.h"

namespace kvs {

KvGeometryRecord ToGeometryRecord(const KvGeometry& g);
// INVALID_ARGUMENT unless the record is a valid geometry (ValidateGeometry).
absl::StatusOr<KvGeometry> FromGeometryRecord(const KvGeometryRecord& r);

// Sets record->page_hashes from its model_fingerprint, geometry, tokens and
// kv_length. INVALID_ARGUMENT if the geometry or kv_length is invalid (on
// error nothing changes).
absl::Status FillPageHashes(SessionRecord* record);

// The record's page hashes, after checking every invariant (hashing every
// page). INVALID_ARGUMENT naming the first one broken.
absl::StatusOr<std::vector<PageHash>> CheckSessionRecord(const SessionRecord& record);

// A record's pages as verified: what incremental verification compares.
struct VerifiedPages {
  std::string model_fingerprint;
  KvGeometry geometry;
  std::vector<PageHash> hashes;  // the record's page_hashes
  // Per page, PageTokensCrc of its tokens. Empty when the pages were not
  // verified (a corrupt record's listed hashes): nothing is then reused.
  std::vector<uint32_t> token_crcs;
  // The chain's salt (a session that slid); pages at or past a salt are
  // reused only against a reference with the same salt.
  std::optional<ChainSalt> salt;
  // Where the chain starts (ChainStart of the record's owner and
  // shared_prefix_chain); pages
  // are reused only against a reference with the same start.
  PageHash start;
};

// The record's slide salt, nullopt when it lists none; INVALID_ARGUMENT for
// a salt that is not 16 bytes or a negative page.
absl::StatusOr<std::optional<ChainSalt>> RecordSalt(const SessionRecord& record);

// CRC-32C of a page's token count and tokens (their in-memory bytes; never
// stored, so the same on every run of this build).
uint32_t PageTokensCrc(std::span<const int32_t> tokens);

// CheckSessionRecord, reusing what `reference` (null: nothing) verified as
// described above. Adds the number of pages it hashed with SHA-256 to
// *pages_hashed (if not null). INVALID_ARGUMENT as CheckSessionRecord, for
// the same records.
absl::StatusOr<VerifiedPages> VerifySessionRecord(const SessionRecord& record,
                                                  const VerifiedPages* reference,
                                                  int64_t* pages_hashed);

}  // namespace kvs

#endif  // KVSESSION_CACHE_RECORD_VALIDATION_H_
