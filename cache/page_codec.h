// The on-disk encoding of one KV page (docs/storage-format.md, "Pages").
//
// An encoded page is a 48-byte little-endian header followed by the payload:
//
//   header  magic "KVPG", format version, the page geometry, n_tokens,
//           payload length, CRC-32C of the payload, CRC-32C of the header
//   payload for each (layer, k|v, kv_head) block in page order, the first
//           n_tokens slots of the block (n_tokens * head_dim elements) as
//           rows; in format version 3 (a full q8_0 page) the blocks as
//           they lie in RAM (kernels/q8_0_kv_blocks.h)
//
// so a partial page (n_tokens < T) costs only the slots it holds. The
// in-RAM page (cache/kv_geometry.h) is page_bytes() long; EncodePage reads
// it, DecodePage writes it.
//
// DecodePage checks everything it reads and returns DATA_LOSS, with a
// message naming the first mismatch (size, magic, header checksum, format
// version, geometry, length, payload checksum), for any encoding that
// EncodePage did not produce for that geometry. It never reads past
// `encoded` nor writes outside the page's first n_tokens slots of each block.
//
// Pure functions, thread-safe.
#ifndef KVSESSION_CACHE_PAGE_CODEC_H_
#define KVSESSION_CACHE_PAGE_CODEC_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/kv_geometry.h"

namespace kvs {

inline constexpr size_t kPageHeaderBytes = 48;
inline constexpr uint32_t kPageMagic = 0x4750564Bu;  // bytes "KVPG"
// Version 1: every block's slots as rows (any dtype, any n_tokens).
// Version 2: a full q8_0 page whose key blocks are packed groups
// (kernels/q8_0_kv_blocks.h) and value blocks rows: the RAM layout of the
// forty-second sitting's builds. Read, no longer written.
// Version 3: a full q8_0 page as it lies in RAM: key blocks packed groups,
// value blocks their scales then their quants (kernels/q8_0_kv_blocks.h).
// A full q8_0 page is written as version 3 (its pool page as it is); a
// partial page is always version 1; a reader takes all three.
inline constexpr uint32_t kPageFormatVersion = 1;
inline constexpr uint32_t kPageFormatVersionPackedKeys = 2;
inline constexpr uint32_t kPageFormatVersionQ8_0Blocks = 3;

// OK if every dimension is in [1, 65536], the dtype is known, a page
// fits in 1 GiB and a q8_0 page holds whole key groups (page_tokens a
// multiple of 16); INVALID_ARGUMENT naming the bad field otherwise.
absl::Status ValidateGeometry(const KvGeometry& g);
// "layers=2 kv_heads=2 head_dim=4 page_tokens=16 dtype=f16".
std::string DescribeGeometry(const KvGeometry& g);

// Valid tokens in page `page_index` of a sequence with `kv_length`
// positions: T for every page but the last, which holds the rest.
inline int PageTokensAt(const KvGeometry& g, int kv_length, int page_index) {
  const int rest = kv_length - page_index * g.page_tokens;
  return rest < g.page_tokens ? rest : g.page_tokens;
}

// The page format version EncodePage writes for a page of n_tokens slots.
uint32_t PageFormatVersionFor(const KvGeometry& g, int n_tokens);

// Bytes of the payload and of the whole encoding of a page with n_tokens
// valid slots.
size_t PagePayloadBytes(const KvGeometry& g, int n_tokens);
inline size_t EncodedPageBytes(const KvGeometry& g, int n_tokens) {
  return kPageHeaderBytes + PagePayloadBytes(g, n_tokens);
}

// Encodes the first n_tokens slots (1 <= n_tokens <= T) of `page`, which is
// g.page_bytes() long. Requires a valid geometry.
std::string EncodePage(const KvGeometry& g, const uint8_t* page, int n_tokens);

// An encoded page in two parts, so a full page is written from its pool
// page without a copy: header() is the kPageHeaderBytes-byte header,
// payload() the bytes after it. It either owns the whole encoding (a
// string, as EncodePage returns: the constructor is implicit, so a caller
// that encodes to a string passes it as it is) or owns only the header and
// views a payload it does not own, which must outlive it unchanged
// (EncodePageParts of a full page views the pool page itself).
class PageEncoding {
 public:
  PageEncoding(std::string encoded)  // NOLINT(google-explicit-constructor)
      : owned_(std::move(encoded)), whole_(true) {}
  PageEncoding(std::string header, std::string_view payload)
      : owned_(std::move(header)), payload_(payload), whole_(false) {}

  // The first kPageHeaderBytes bytes (fewer if a whole encoding is shorter).
  std::string_view header() const {
    return std::string_view(owned_).substr(0, whole_ ? kPageHeaderBytes : owned_.size());
  }
  std::string_view payload() const {
    return whole_ ? std::string_view(owned_).substr(std::min(owned_.size(), kPageHeaderBytes)) : payload_;
  }
  size_t size() const { return header().size() + payload().size(); }

 private:
  std::string owned_;         // the whole encoding, or the header alone
  std::string_view payload_;  // when !whole_: the viewed payload
  bool whole_;
};

// The bytes of EncodePage(g, page, n_tokens) as a PageEncoding: a full
// page's payload is `page` itself (the payload has the in-RAM layout), so
// only its checksum is computed, and `page` must outlive the result
// unchanged; a partial page's slots are gathered into an owned encoding.
PageEncoding EncodePageParts(const KvGeometry& g, const uint8_t* page, int n_tokens);

// What a well-formed encoded page says about itself.
struct EncodedPageInfo {
  KvGeometry geometry;
  int n_tokens = 0;
  uint32_t version = kPageFormatVersion;
};

// Checks the header of an encoding (size, magic, header checksum, format
// version, a valid geometry, 1 <= n_tokens <= T, payload length) but not
// the payload checksum: cheap, for pages just encoded. DATA_LOSS on any
// mismatch.
absl::StatusOr<EncodedPageInfo> ReadPageHeader(std::string_view encoded);
// The same checks of an encoding in parts.
absl::StatusOr<EncodedPageInfo> ReadPageHeaderOfParts(const PageEncoding& encoded);

// For a page read in two parts (PageFiles::ReadInto): `header` is the
// kPageHeaderBytes-byte header, `payload` the payload_bytes after it. The
// checks of CheckEncodedPage (the length against payload_bytes), and the
// geometry must be `g`. A full page's payload (n_tokens == T) has the
// in-RAM layout, so `payload` may be the pool page itself; but a version-1
// or version-2 full q8_0 page (written before version 3) then needs
// FullPageToPoolLayout.
absl::StatusOr<EncodedPageInfo> CheckSplitPage(const KvGeometry& g, std::string_view header,
                                               const uint8_t* payload, size_t payload_bytes);

// ReadPageHeader, then the payload checksum: the whole encoding on its own,
// without decoding it. DATA_LOSS on any mismatch.
absl::StatusOr<EncodedPageInfo> CheckEncodedPage(std::string_view encoded);

// CheckEncodedPage, then requires the page's geometry to be `g` and copies
// its slots into `page` (g.page_bytes() long); slots >= *n_tokens are left
// untouched. DATA_LOSS on any mismatch, and then `page` is unchanged.
absl::Status DecodePage(const KvGeometry& g, std::string_view encoded, uint8_t* page,
                        int* n_tokens);

// DecodePage for a destination the caller discards on error (restore into
// a freshly allocated pool page): checks the header and geometry, then
// checks the payload checksum while copying, a few blocks at a time, so
// each payload byte is read from memory once. Same checks and errors as
// DecodePage, but on DATA_LOSS `page` holds unspecified data.
absl::Status DecodePageInto(const KvGeometry& g, std::string_view encoded, uint8_t* page,
                            int* n_tokens);

// A full page read straight into `page` from a payload of `version`
// (CheckSplitPage), put in the pool's layout in place: a version-1 q8_0
// page's key and value blocks are rows, a version-2 page's value blocks
// (kernels/q8_0_kv_blocks.h has the blocks' layout). Nothing for version 3
// and for other dtypes.
void FullPageToPoolLayout(const KvGeometry& g, uint32_t version, uint8_t* page);

}  // namespace kvs

#endif  // KVSESSION_CACHE_PAGE_CODEC_H_
