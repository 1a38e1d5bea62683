// PageHash: the content address of one KV page, on disk and in RAM.
//
// A page's hash is chained from the previous page's hash:
//
//   hash(page i) = SHA-256(tag, hash(page i-1), model fingerprint, geometry,
//                          tokens of page i)[0..16)
//
// with hash(page -1) = 16 zero bytes (docs/storage-format.md gives the exact
// bytes). Because the KV of a position depends on every token before it,
// the chain names a page by everything that determines its contents: two
// sequences of the same model and geometry with the same first k pages of
// tokens have the same first k page hashes, and any difference in an earlier
// page changes every later hash. A partial last page (fewer than T tokens)
// hashes only the tokens it holds, so it differs from the full page it may
// become.
//
// Pure functions, thread-safe.
#ifndef KVSESSION_CACHE_PAGE_HASH_H_
#define KVSESSION_CACHE_PAGE_HASH_H_

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/kv_geometry.h"

namespace kvs {

struct PageHash {
  static constexpr size_t kSize = 16;
  std::array<uint8_t, kSize> bytes{};

  // The 16 bytes as a string (the `pages` column family key).
  std::string_view view() const {
    return std::string_view(reinterpret_cast<const char*>(bytes.data()), kSize);
  }
  // Lowercase hex, 32 characters.
  std::string hex() const;
  // The hash held in `b`, or nullopt unless `b` is exactly 16 bytes.
  static std::optional<PageHash> FromBytes(std::string_view b);

  auto operator<=>(const PageHash&) const = default;

  template <typename H>
  friend H AbslHashValue(H h, const PageHash& p) {
    return H::combine_contiguous(std::move(h), p.bytes.data(), p.bytes.size());
  }
};

// The hash of the page holding `tokens` (1..T of them), following the page
// whose hash is `previous` (all zeros for the first page).
PageHash ChainPageHash(const PageHash& previous, std::string_view model_fingerprint,
                       const KvGeometry& geometry, std::span<const int32_t> tokens);

// One hash per page covering positions [0, kv_length) of `tokens`: page i
// holds tokens [i*T, min((i+1)*T, kv_length)). Requires 0 <= kv_length <=
// tokens.size() and geometry.page_tokens > 0.
std::vector<PageHash> ChainPageHashes(std::string_view model_fingerprint,
                                      const KvGeometry& geometry,
                                      std::span<const int32_t> tokens, int kv_length);

// The salt that replaces the previous-page hash of the first page after a
// context slide (PageHashChain::SetSalt): SHA-256(tag "kvsession.slide.v1",
// the hash of the last dropped page, keep_pages, dropped_pages)[0..16). The
// last dropped page's hash names every token up to the dropped ones (and
// every earlier slide), and the two counts name the position shift, so the
// salted chain names everything that determines the turned pages' KV; and
// no fresh prefill's chain can produce it (another tag).
PageHash SlideSalt(const PageHash& last_dropped, int keep_pages, int dropped_pages);

// The salt that replaces `salt` when a slid session is cut to `length`
// tokens past the salted page's start (Truncate, Fork at_length):
// SHA-256(tag "kvsession.cut.v1", salt, le32 length)[0..16). The rows
// appended after such a cut are computed after the slide, while the
// source's rows at those positions were computed before it and moved: the
// same tokens under the same salt would name two different KVs. The new
// salt (at the same page) names the cut as well, so the cut session's
// salted pages never share a hash with the source's.
PageHash CutSalt(const PageHash& salt, int length);

// The tenant whose sessions chain from 16 zero bytes, as before tenants
// existed (service/auth/principal.h kDefaultTenant is the same name).
inline constexpr char kUnsaltedTenant[] = "default";

// Where the page hash chain of a session owned by `owner` starts (its
// hash(page -1)): 16 zero bytes for "" and kUnsaltedTenant, otherwise
// SHA-256(tag "kvsession.tenant.v1", le64 length of owner, owner)[0..16).
// Two tenants' identical tokens therefore have different page hashes: one
// tenant's pages are never a prefix-cache hit for another, in RAM or on
// disk (docs/storage-format.md, "Page hashes").
PageHash TenantChainStart(std::string_view owner);

// Where the chain of a session owned by `owner` starts: zeros when it was
// created under kvsessiond --shared-prefix-cache (`shared`: one public
// prefix pool, every tenant's chain unsalted), else TenantChainStart.
// Recorded per session (SessionRecord.shared_prefix_chain), so a session
// keeps its chain when the flag is flipped across a restart.
PageHash ChainStart(std::string_view owner, bool shared);

}  // namespace kvs

#endif  // KVSESSION_CACHE_PAGE_HASH_H_
