// libFuzzer target: the page codec (cache/page_codec.h) on bytes read from
// disk.
//
// Byte 0, bit 0 picks the mode:
//   0  the rest is an encoded page: ReadPageHeader / CheckEncodedPage /
//      DecodePage must reject it or decode it without reading past it or
//      writing past the page (an exactly-sized heap buffer, so ASan sees it).
//   1  bytes 1..6 give a small geometry, n_tokens and a one-byte change
//      (offset, xor); the rest fills a page. EncodePage, apply the change,
//      DecodePage: an untouched encoding gives the page's slots back, a
//      changed one gives DATA_LOSS and leaves the destination unchanged.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cache/page_codec.h"

namespace {

void DecodeRaw(std::string_view encoded) {
  (void)kvs::ReadPageHeader(encoded);
  auto info = kvs::CheckEncodedPage(encoded);
  const kvs::KvGeometry fixed{.n_layers = 2, .n_kv_heads = 3, .head_dim = 4, .page_tokens = 5,
                              .dtype = kvs::KvDtype::kF16};
  std::vector<uint8_t> page(fixed.page_bytes());
  int n_tokens = 0;
  (void)kvs::DecodePage(fixed, encoded, page.data(), &n_tokens);
  if (info.ok() && info->geometry.page_bytes() <= (1u << 20)) {
    std::vector<uint8_t> own(info->geometry.page_bytes());
    if (!kvs::DecodePage(info->geometry, encoded, own.data(), &n_tokens).ok()) __builtin_trap();
  }
}

void RoundTrip(const uint8_t* data, size_t size) {
  if (size < 7) return;
  const kvs::KvGeometry g{.n_layers = 1 + data[1] % 3, .n_kv_heads = 1 + data[2] % 3,
                          .head_dim = 1 + data[3] % 8, .page_tokens = 1 + (data[4] & 7),
                          .dtype = (data[4] & 8) ? kvs::KvDtype::kF32 : kvs::KvDtype::kF16};
  // (bf16 pages are bytes to the codec like these; q8_0 pages, whose key
  // blocks the codec converts, need head_dim % 32 == 0 and page_tokens a
  // multiple of 16, which these small shapes avoid: cache/page_codec_test.cc
  // covers them.)
  const int n_tokens = 1 + (data[4] >> 4) % g.page_tokens;
  const uint8_t change_at = data[5], change_xor = data[6];
  std::vector<uint8_t> page(g.page_bytes());
  for (size_t i = 0; i < page.size(); ++i) page[i] = size > 7 ? data[7 + i % (size - 7)] : 0;

  std::string encoded = kvs::EncodePage(g, page.data(), n_tokens);
  if (encoded.size() != kvs::EncodedPageBytes(g, n_tokens)) __builtin_trap();
  encoded[change_at % encoded.size()] ^= static_cast<char>(change_xor);

  std::vector<uint8_t> out(g.page_bytes(), 0xA5);
  const std::vector<uint8_t> before = out;
  int decoded_tokens = 0;
  const absl::Status s = kvs::DecodePage(g, encoded, out.data(), &decoded_tokens);
  if (change_xor != 0) {
    if (s.code() != absl::StatusCode::kDataLoss || out != before) __builtin_trap();
    return;
  }
  if (!s.ok() || decoded_tokens != n_tokens) __builtin_trap();
  // Slots [0, n_tokens) of every block come back; the rest stay untouched.
  const size_t slot = g.row_bytes();
  for (size_t block = 0; block < page.size() / g.block_bytes(); ++block) {
    const size_t at = block * g.block_bytes();
    for (int t = 0; t < g.page_tokens; ++t) {
      const size_t off = at + t * slot;
      const uint8_t* want = t < n_tokens ? &page[off] : &before[off];
      if (std::memcmp(&out[off], want, slot) != 0) __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] & 1) {
    RoundTrip(data, size);
  } else {
    DecodeRaw(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  }
  return 0;
}
