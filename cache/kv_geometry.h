// KvGeometry: the shape of one KV page, the only model knowledge the cache
// has (layers, KV heads, head_dim, tokens per page, element type).
// A slot is one row of head_dim values of the element type (kv_dtype.h:
// f32, f16, bf16, or q8_0 blocks of 32 values).
//
// Page layout, layer-major and head-major inside a layer:
//
//   page[layer][k|v][kv_head][slot 0..T-1][head_dim]
//
// so the keys of one (layer, head) for the T tokens of a page are one
// contiguous block of T * head_dim values, which is what the attention
// kernel streams through. A block holds its slots as rows, except a q8_0
// cache's blocks (kernels/q8_0_kv_blocks.h; the same bytes per block):
// key blocks are one packed group per 16 slots, in the order the scores'
// kernels multiply (T a multiple of 16), value blocks the T slots' scales
// then their quants, so slot_offset() does not apply to them.
#ifndef KVSESSION_CACHE_KV_GEOMETRY_H_
#define KVSESSION_CACHE_KV_GEOMETRY_H_

#include <cstddef>
#include <cstdint>

#include "kernels/attention.h"

namespace kvs {

enum class KvPart : int { kKey = 0, kValue = 1 };

struct KvGeometry {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int page_tokens = 16;  // T
  KvDtype dtype = KvDtype::kF16;

  // Bytes of one slot: head_dim values of `dtype` (kv_dtype.h).
  size_t row_bytes() const { return KvBytes(dtype, head_dim); }
  // Bytes of one (layer, part, head) block: T slots of head_dim values.
  size_t block_bytes() const { return static_cast<size_t>(page_tokens) * row_bytes(); }
  size_t page_bytes() const { return static_cast<size_t>(n_layers) * 2 * n_kv_heads * block_bytes(); }
  // Offset of the (layer, part, head) block inside a page.
  size_t block_offset(int layer, KvPart part, int head) const {
    return ((static_cast<size_t>(layer) * 2 + static_cast<int>(part)) * n_kv_heads + head) *
           block_bytes();
  }
  // Offset of one slot's head_dim values inside its block.
  size_t slot_offset(int slot) const {
    return static_cast<size_t>(slot) * row_bytes();
  }
  // KV bytes one token occupies across all layers.
  size_t bytes_per_token() const { return page_bytes() / page_tokens; }

  bool operator==(const KvGeometry&) const = default;
};

}  // namespace kvs

#endif  // KVSESSION_CACHE_KV_GEOMETRY_H_
