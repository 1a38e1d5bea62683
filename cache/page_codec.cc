#include "cache/page_codec.h"

#include <cstring>
#include <vector>

#include "absl/base/internal/raw_logging.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cache/crc32c.h"
#include "kernels/q8_0_kv_blocks.h"

namespace kvs {
namespace {

// Header field offsets (docs/storage-format.md, "Pages").
constexpr size_t kMagicOffset = 0;
constexpr size_t kVersionOffset = 4;
constexpr size_t kGeometryOffset = 8;  // n_layers, n_kv_heads, head_dim, page_tokens, dtype
constexpr size_t kTokensOffset = 28;
constexpr size_t kPayloadBytesOffset = 32;
constexpr size_t kPayloadCrcOffset = 40;
constexpr size_t kHeaderCrcOffset = 44;
static_assert(kHeaderCrcOffset + 4 == kPageHeaderBytes);

constexpr int kMaxDimension = 1 << 16;
constexpr uint64_t kMaxPageBytes = uint64_t{1} << 30;

void PutLe32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutLe64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetLe32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
uint64_t GetLe64(const uint8_t* p) {
  return uint64_t{GetLe32(p)} | uint64_t{GetLe32(p + 4)} << 32;
}

// How a block's payload relates to the block in RAM.
enum class BlockPayload {
  kAsInRam,    // the same bytes
  kKeyRows,    // rows, the RAM block q8_0 key groups (q8_0_kv_blocks.h)
  kValueRows,  // rows, the RAM block a q8_0 value block (q8_0_kv_blocks.h)
};

// What a block of `part` is in a payload of `version`.
BlockPayload PayloadOf(const KvGeometry& g, uint32_t version, KvPart part) {
  if (g.dtype != KvDtype::kQ8_0 || version == kPageFormatVersionQ8_0Blocks) return BlockPayload::kAsInRam;
  if (part == KvPart::kKey) {
    return version == kPageFormatVersionPackedKeys ? BlockPayload::kAsInRam : BlockPayload::kKeyRows;
  }
  return BlockPayload::kValueRows;  // versions 1 and 2
}

// Calls fn(block_offset, bytes, payload) for the first n_tokens slots of
// every (layer, part, head) block, in payload order; `payload` says how
// the block's payload of that version relates to the block in RAM.
template <typename Fn>
void ForEachBlock(const KvGeometry& g, int n_tokens, uint32_t version, Fn fn) {
  const size_t bytes = g.slot_offset(n_tokens);
  for (int layer = 0; layer < g.n_layers; ++layer) {
    for (KvPart part : {KvPart::kKey, KvPart::kValue}) {
      const BlockPayload payload = PayloadOf(g, version, part);
      for (int head = 0; head < g.n_kv_heads; ++head) fn(g.block_offset(layer, part, head), bytes, payload);
    }
  }
}

// A RAM block from its payload: n_tokens slots.
void BlockFromPayload(const KvGeometry& g, BlockPayload payload, const uint8_t* in, size_t bytes, int n_tokens,
                      uint8_t* block) {
  switch (payload) {
    case BlockPayload::kAsInRam:
      std::memcpy(block, in, bytes);
      return;
    case BlockPayload::kKeyRows:
      Q8_0KeyBlockFromRows(in, n_tokens, g.head_dim, block);
      return;
    case BlockPayload::kValueRows:
      Q8_0ValueBlockFromRows(in, n_tokens, g.head_dim, g.page_tokens, block);
      return;
  }
}

// A block's payload from the RAM block: n_tokens slots.
void PayloadFromBlock(const KvGeometry& g, BlockPayload payload, const uint8_t* block, size_t bytes, int n_tokens,
                      uint8_t* out) {
  switch (payload) {
    case BlockPayload::kAsInRam:
      std::memcpy(out, block, bytes);
      return;
    case BlockPayload::kKeyRows:
      Q8_0KeyBlockToRows(block, n_tokens, g.head_dim, out);
      return;
    case BlockPayload::kValueRows:
      Q8_0ValueBlockToRows(block, n_tokens, g.head_dim, g.page_tokens, out);
      return;
  }
}

}  // namespace

uint32_t PageFormatVersionFor(const KvGeometry& g, int n_tokens) {
  return g.dtype == KvDtype::kQ8_0 && n_tokens == g.page_tokens ? kPageFormatVersionQ8_0Blocks : kPageFormatVersion;
}

absl::Status ValidateGeometry(const KvGeometry& g) {
  const std::pair<const char*, int> dims[] = {{"n_layers", g.n_layers},
                                              {"n_kv_heads", g.n_kv_heads},
                                              {"head_dim", g.head_dim},
                                              {"page_tokens", g.page_tokens}};
  uint64_t page_bytes = 2;  // k and v
  for (const auto& [name, value] : dims) {
    if (value < 1 || value > kMaxDimension) {
      return absl::InvalidArgumentError(
          absl::StrCat("geometry ", name, " = ", value, " is outside [1, ", kMaxDimension, "]"));
    }
    page_bytes *= static_cast<uint64_t>(value);  // < 2^33 * 2^16: no overflow
    if (page_bytes > kMaxPageBytes) break;
  }
  if (!KvDtypeKnown(static_cast<uint32_t>(g.dtype))) {
    return absl::InvalidArgumentError(
        absl::StrCat("geometry dtype ", static_cast<int>(g.dtype), " is unknown"));
  }
  if (!KvDtypeFitsHeadDim(g.dtype, g.head_dim)) {
    return absl::InvalidArgumentError(absl::StrCat("geometry head_dim = ", g.head_dim, " cannot be stored as ",
                                                   KvDtypeName(g.dtype), " (a multiple of 32 can)"));
  }
  if (g.dtype == KvDtype::kQ8_0 && g.page_tokens % kQ8_0KeyGroupSlots != 0) {
    return absl::InvalidArgumentError(absl::StrCat("geometry page_tokens = ", g.page_tokens,
                                                   " cannot hold q8_0 keys (a multiple of ", kQ8_0KeyGroupSlots,
                                                   " can)"));
  }
  if (page_bytes > kMaxPageBytes || KvBytes(g.dtype, static_cast<int64_t>(page_bytes)) > kMaxPageBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("geometry ", DescribeGeometry(g), " makes pages larger than 1 GiB"));
  }
  return absl::OkStatus();
}

std::string DescribeGeometry(const KvGeometry& g) {
  const bool known = KvDtypeKnown(static_cast<uint32_t>(g.dtype));
  return absl::StrCat("layers=", g.n_layers, " kv_heads=", g.n_kv_heads,
                      " head_dim=", g.head_dim, " page_tokens=", g.page_tokens, " dtype=",
                      known ? KvDtypeName(g.dtype) : absl::StrCat(static_cast<int>(g.dtype)));
}

size_t PagePayloadBytes(const KvGeometry& g, int n_tokens) {
  return static_cast<size_t>(g.n_layers) * 2 * g.n_kv_heads * g.slot_offset(n_tokens);
}

namespace {

// Writes the header of a page of `n_tokens` slots whose payload (already
// laid out) is `payload`, payload_bytes long, at `out`.
void PutPageHeader(const KvGeometry& g, int n_tokens, const uint8_t* payload, size_t payload_bytes,
                   uint8_t* out) {
  PutLe32(out + kMagicOffset, kPageMagic);
  PutLe32(out + kVersionOffset, PageFormatVersionFor(g, n_tokens));
  const int fields[] = {g.n_layers, g.n_kv_heads, g.head_dim, g.page_tokens,
                        static_cast<int>(g.dtype)};
  for (int i = 0; i < 5; ++i) PutLe32(out + kGeometryOffset + 4 * i, static_cast<uint32_t>(fields[i]));
  PutLe32(out + kTokensOffset, static_cast<uint32_t>(n_tokens));
  PutLe64(out + kPayloadBytesOffset, payload_bytes);
  PutLe32(out + kPayloadCrcOffset, Crc32c(payload, payload_bytes));
  PutLe32(out + kHeaderCrcOffset, Crc32c(out, kHeaderCrcOffset));
}

}  // namespace

std::string EncodePage(const KvGeometry& g, const uint8_t* page, int n_tokens) {
  ABSL_RAW_CHECK(ValidateGeometry(g).ok(), "EncodePage: invalid geometry");
  ABSL_RAW_CHECK(n_tokens >= 1 && n_tokens <= g.page_tokens, "EncodePage: n_tokens out of range");
  const size_t payload_bytes = PagePayloadBytes(g, n_tokens);
  std::string encoded(kPageHeaderBytes + payload_bytes, '\0');
  uint8_t* out = reinterpret_cast<uint8_t*>(encoded.data());

  uint8_t* payload = out + kPageHeaderBytes;
  ForEachBlock(g, n_tokens, PageFormatVersionFor(g, n_tokens), [&](size_t offset, size_t bytes, BlockPayload kind) {
    PayloadFromBlock(g, kind, page + offset, bytes, n_tokens, payload);
    payload += bytes;
  });
  PutPageHeader(g, n_tokens, out + kPageHeaderBytes, payload_bytes, out);
  return encoded;
}

PageEncoding EncodePageParts(const KvGeometry& g, const uint8_t* page, int n_tokens) {
  if (n_tokens != g.page_tokens) return PageEncoding(EncodePage(g, page, n_tokens));
  ABSL_RAW_CHECK(ValidateGeometry(g).ok(), "EncodePageParts: invalid geometry");
  const size_t payload_bytes = PagePayloadBytes(g, n_tokens);
  std::string header(kPageHeaderBytes, '\0');
  PutPageHeader(g, n_tokens, page, payload_bytes, reinterpret_cast<uint8_t*>(header.data()));
  return PageEncoding(std::move(header),
                      std::string_view(reinterpret_cast<const char*>(page), payload_bytes));
}

namespace {

// ReadPageHeader for a header whose payload, `have` bytes, is elsewhere.
absl::StatusOr<EncodedPageInfo> ReadHeaderWithPayloadOf(const uint8_t* in, uint64_t have);

}  // namespace

absl::StatusOr<EncodedPageInfo> ReadPageHeader(std::string_view encoded) {
  if (encoded.size() < kPageHeaderBytes) {
    return absl::DataLossError(absl::StrCat("encoded page is ", encoded.size(),
                                            " bytes, shorter than its ", kPageHeaderBytes,
                                            "-byte header"));
  }
  return ReadHeaderWithPayloadOf(reinterpret_cast<const uint8_t*>(encoded.data()),
                                 encoded.size() - kPageHeaderBytes);
}

absl::StatusOr<EncodedPageInfo> ReadPageHeaderOfParts(const PageEncoding& encoded) {
  if (encoded.header().size() != kPageHeaderBytes) return ReadPageHeader(encoded.header());
  return ReadHeaderWithPayloadOf(reinterpret_cast<const uint8_t*>(encoded.header().data()),
                                 encoded.payload().size());
}

absl::StatusOr<EncodedPageInfo> CheckSplitPage(const KvGeometry& g, std::string_view header,
                                               const uint8_t* payload, size_t payload_bytes) {
  if (header.size() != kPageHeaderBytes) {
    return absl::DataLossError(absl::StrCat("page header is ", header.size(), " bytes, not ",
                                            kPageHeaderBytes));
  }
  const uint8_t* in = reinterpret_cast<const uint8_t*>(header.data());
  absl::StatusOr<EncodedPageInfo> info = ReadHeaderWithPayloadOf(in, payload_bytes);
  if (!info.ok()) return info;
  if (!(info->geometry == g)) {
    return absl::DataLossError(absl::StrCat("page geometry ", DescribeGeometry(info->geometry),
                                            " does not match the expected ", DescribeGeometry(g)));
  }
  const uint32_t stored_crc = GetLe32(in + kPayloadCrcOffset);
  if (const uint32_t crc = Crc32c(payload, payload_bytes); crc != stored_crc) {
    return absl::DataLossError(absl::StrFormat(
        "page payload checksum mismatch (stored 0x%08x, computed 0x%08x)", stored_crc, crc));
  }
  return info;
}

namespace {

absl::StatusOr<EncodedPageInfo> ReadHeaderWithPayloadOf(const uint8_t* in, uint64_t have) {
  if (const uint32_t magic = GetLe32(in + kMagicOffset); magic != kPageMagic) {
    return absl::DataLossError(absl::StrFormat("bad page magic 0x%08x (expected 0x%08x)", magic,
                                               kPageMagic));
  }
  const uint32_t stored_header_crc = GetLe32(in + kHeaderCrcOffset);
  if (const uint32_t crc = Crc32c(in, kHeaderCrcOffset); crc != stored_header_crc) {
    return absl::DataLossError(absl::StrFormat(
        "page header checksum mismatch (stored 0x%08x, computed 0x%08x)", stored_header_crc, crc));
  }
  const uint32_t version = GetLe32(in + kVersionOffset);
  if (version < kPageFormatVersion || version > kPageFormatVersionQ8_0Blocks) {
    return absl::DataLossError(absl::StrCat("page format version ", version, " is not supported (this build reads ",
                                            kPageFormatVersion, " to ", kPageFormatVersionQ8_0Blocks, ")"));
  }

  // Every field is checked against a bound before it is used in arithmetic.
  uint32_t fields[5];
  for (int i = 0; i < 5; ++i) fields[i] = GetLe32(in + kGeometryOffset + 4 * i);
  for (int i = 0; i < 4; ++i) {
    if (fields[i] == 0 || fields[i] > kMaxDimension) {
      return absl::DataLossError(
          absl::StrCat("page header dimension ", fields[i], " is outside [1, ", kMaxDimension, "]"));
    }
  }
  if (!KvDtypeKnown(fields[4])) {
    return absl::DataLossError(absl::StrCat("page header dtype ", fields[4], " is unknown"));
  }
  EncodedPageInfo info;
  info.geometry.n_layers = static_cast<int>(fields[0]);
  info.geometry.n_kv_heads = static_cast<int>(fields[1]);
  info.geometry.head_dim = static_cast<int>(fields[2]);
  info.geometry.page_tokens = static_cast<int>(fields[3]);
  info.geometry.dtype = static_cast<KvDtype>(fields[4]);
  if (absl::Status s = ValidateGeometry(info.geometry); !s.ok()) {
    return absl::DataLossError(absl::StrCat("page header: ", s.message()));
  }
  const uint32_t n_tokens = GetLe32(in + kTokensOffset);
  if (n_tokens < 1 || n_tokens > fields[3]) {
    return absl::DataLossError(absl::StrCat("page holds ", n_tokens, " tokens, outside [1, ",
                                            fields[3], "]"));
  }
  info.n_tokens = static_cast<int>(n_tokens);
  if (version != kPageFormatVersion &&
      PageFormatVersionFor(info.geometry, info.n_tokens) != kPageFormatVersionQ8_0Blocks) {
    return absl::DataLossError(absl::StrCat("page format version ", version, " holds full q8_0 pages only, not ",
                                            n_tokens, " tokens of ", KvDtypeName(info.geometry.dtype)));
  }
  info.version = version;

  const uint64_t payload_bytes = GetLe64(in + kPayloadBytesOffset);
  const uint64_t expected = PagePayloadBytes(info.geometry, info.n_tokens);
  if (payload_bytes != expected) {
    return absl::DataLossError(absl::StrCat("page payload length ", payload_bytes,
                                            " does not match its geometry (expected ", expected,
                                            ")"));
  }
  if (have < payload_bytes) {
    return absl::DataLossError(absl::StrCat("page truncated: ", have, " of ", payload_bytes,
                                            " payload bytes"));
  }
  if (have > payload_bytes) {
    return absl::DataLossError(
        absl::StrCat("page has ", have - payload_bytes, " trailing bytes after its payload"));
  }
  return info;
}

}  // namespace

absl::StatusOr<EncodedPageInfo> CheckEncodedPage(std::string_view encoded) {
  absl::StatusOr<EncodedPageInfo> info = ReadPageHeader(encoded);
  if (!info.ok()) return info;
  const uint8_t* in = reinterpret_cast<const uint8_t*>(encoded.data());
  const uint32_t stored_crc = GetLe32(in + kPayloadCrcOffset);
  const size_t payload_bytes = encoded.size() - kPageHeaderBytes;
  if (const uint32_t crc = Crc32c(in + kPageHeaderBytes, payload_bytes); crc != stored_crc) {
    return absl::DataLossError(absl::StrFormat(
        "page payload checksum mismatch (stored 0x%08x, computed 0x%08x)", stored_crc, crc));
  }
  return info;
}

namespace {

// DATA_LOSS naming both geometries unless the page's is the expected one.
absl::Status SameGeometry(const KvGeometry& stored, const KvGeometry& expected) {
  if (stored == expected) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("page geometry ", DescribeGeometry(stored),
                                          " does not match the expected ", DescribeGeometry(expected)));
}

}  // namespace

absl::Status DecodePage(const KvGeometry& g, std::string_view encoded, uint8_t* page,
                        int* n_tokens) {
  absl::StatusOr<EncodedPageInfo> info = CheckEncodedPage(encoded);
  if (!info.ok()) return info.status();
  if (absl::Status same = SameGeometry(info->geometry, g); !same.ok()) return same;
  const uint8_t* payload = reinterpret_cast<const uint8_t*>(encoded.data()) + kPageHeaderBytes;
  ForEachBlock(g, info->n_tokens, info->version, [&](size_t offset, size_t bytes, BlockPayload kind) {
    BlockFromPayload(g, kind, payload, bytes, info->n_tokens, page + offset);
    payload += bytes;
  });
  *n_tokens = info->n_tokens;
  return absl::OkStatus();
}

absl::Status DecodePageInto(const KvGeometry& g, std::string_view encoded, uint8_t* page,
                            int* n_tokens) {
  absl::StatusOr<EncodedPageInfo> info = ReadPageHeader(encoded);
  if (!info.ok()) return info.status();
  if (absl::Status same = SameGeometry(info->geometry, g); !same.ok()) return same;
  // Blocks are contiguous in the payload: checksum a run of them (while it
  // is in cache), then copy the run's blocks to their places.
  constexpr size_t kRunBytes = size_t{64} << 10;
  const uint8_t* in = reinterpret_cast<const uint8_t*>(encoded.data());
  const uint8_t* payload = in + kPageHeaderBytes;
  const uint8_t* run_start = payload;
  size_t run_bytes = 0;
  uint32_t crc = 0;
  size_t pending[64];
  BlockPayload pending_kind[64];
  int n_pending = 0;
  const size_t block_bytes = g.slot_offset(info->n_tokens);
  auto flush = [&] {
    crc = Crc32c(run_start, run_bytes, crc);
    for (int i = 0; i < n_pending; ++i) {
      const uint8_t* block = run_start + static_cast<size_t>(i) * block_bytes;
      BlockFromPayload(g, pending_kind[i], block, block_bytes, info->n_tokens, page + pending[i]);
    }
    run_start += run_bytes;
    run_bytes = 0;
    n_pending = 0;
  };
  ForEachBlock(g, info->n_tokens, info->version, [&](size_t offset, size_t bytes, BlockPayload kind) {
    pending_kind[n_pending] = kind;
    pending[n_pending++] = offset;
    run_bytes += bytes;
    if (run_bytes >= kRunBytes || n_pending == 64) flush();
  });
  if (n_pending > 0) flush();
  if (const uint32_t stored_crc = GetLe32(in + kPayloadCrcOffset); crc != stored_crc) {
    return absl::DataLossError(absl::StrFormat(
        "page payload checksum mismatch (stored 0x%08x, computed 0x%08x)", stored_crc, crc));
  }
  *n_tokens = info->n_tokens;
  return absl::OkStatus();
}

void FullPageToPoolLayout(const KvGeometry& g, uint32_t version, uint8_t* page) {
  std::vector<uint8_t> rows;
  ForEachBlock(g, g.page_tokens, version, [&](size_t offset, size_t bytes, BlockPayload kind) {
    if (kind == BlockPayload::kAsInRam) return;
    rows.assign(page + offset, page + offset + bytes);
    BlockFromPayload(g, kind, rows.data(), bytes, g.page_tokens, page + offset);
  });
}

}  // namespace kvs
