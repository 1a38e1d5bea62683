// Test helpers for pages as the codec writes them and as earlier builds
// wrote them (docs/storage-format.md, section 4): a block's slot as a row
// whatever the block's layout, and encodings of page format versions
// EncodePage no longer writes, made here from the documented layout.
#ifndef KVSESSION_CACHE_PAGE_CODEC_TEST_UTIL_H_
#define KVSESSION_CACHE_PAGE_CODEC_TEST_UTIL_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cache/crc32c.h"
#include "cache/kv_geometry.h"
#include "cache/page_codec.h"
#include "kernels/q8_0_kv_blocks.h"

namespace kvs {

// Slot `slot` of the block at `block` as a row: a q8_0 block's through
// its slot functions (q8_0_kv_blocks.h), any other block's bytes as they
// are.
inline std::vector<uint8_t> SlotRow(const KvGeometry& g, KvPart part, const uint8_t* block, int slot) {
  std::vector<uint8_t> row(g.row_bytes());
  if (g.dtype == KvDtype::kQ8_0 && part == KvPart::kKey) {
    LoadQ8_0KeySlot(block, g.head_dim, slot, row.data());
  } else if (g.dtype == KvDtype::kQ8_0) {
    LoadQ8_0ValueSlot(block, g.head_dim, g.page_tokens, slot, row.data());
  } else {
    std::memcpy(row.data(), block + g.slot_offset(slot), row.size());
  }
  return row;
}

// An encoding of `payload` with a header written here from the documented
// layout (docs/storage-format.md), for versions and payloads EncodePage
// no longer writes.
inline std::string HandMadeEncoding(const KvGeometry& g, uint32_t version, int n_tokens,
                                    const std::vector<uint8_t>& payload) {
  std::string e(kPageHeaderBytes, '\0');
  auto put = [&](size_t at, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) e[at + i] = static_cast<char>(v >> (8 * i));
  };
  e.replace(0, 4, "KVPG");
  put(4, version, 4);
  put(8, g.n_layers, 4);
  put(12, g.n_kv_heads, 4);
  put(16, g.head_dim, 4);
  put(20, g.page_tokens, 4);
  put(24, static_cast<uint32_t>(g.dtype), 4);
  put(28, n_tokens, 4);
  put(32, payload.size(), 8);
  put(40, Crc32c(payload.data(), payload.size()), 4);
  put(44, Crc32c(e.data(), 44), 4);
  return e + std::string(payload.begin(), payload.end());
}

// A q8_0 page as format 1 stored it (every block's slots as rows) or as
// format 2 did (the key blocks as in RAM, the value blocks rows).
inline std::vector<uint8_t> AsOlderFormat(const KvGeometry& g, const std::vector<uint8_t>& page,
                                          uint32_t version) {
  std::vector<uint8_t> out = page;
  for (int layer = 0; layer < g.n_layers; ++layer) {
    for (KvPart part : {KvPart::kKey, KvPart::kValue}) {
      if (part == KvPart::kKey && version == kPageFormatVersionPackedKeys) continue;
      for (int head = 0; head < g.n_kv_heads; ++head) {
        const size_t block = g.block_offset(layer, part, head);
        for (int slot = 0; slot < g.page_tokens; ++slot) {
          const std::vector<uint8_t> row = SlotRow(g, part, page.data() + block, slot);
          std::memcpy(out.data() + block + g.slot_offset(slot), row.data(), row.size());
        }
      }
    }
  }
  return out;
}

}  // namespace kvs

#endif  // KVSESSION_CACHE_PAGE_CODEC_TEST_UTIL_H_
