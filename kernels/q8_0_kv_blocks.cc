#include "kernels/q8_0_kv_blocks.h"

#include <cstring>

#include "kernels/packed_q8_0.h"

namespace kvs {
namespace {

constexpr size_t kRowBlockBytes = 34;  // F16 scale, then 32 int8 quants
constexpr size_t kScaleBytes = 2;

size_t RowBytes(int head_dim) { return static_cast<size_t>(head_dim / 32) * kRowBlockBytes; }

// Slot `slot`'s group, and its lane n in it.
uint8_t* KeyGroup(uint8_t* block, int head_dim, int slot) {
  return block + static_cast<size_t>(slot / kQ8_0KeyGroupSlots) * Q8_0KeyGroupBytes(head_dim);
}
const uint8_t* KeyGroup(const uint8_t* block, int head_dim, int slot) {
  return block + static_cast<size_t>(slot / kQ8_0KeyGroupSlots) * Q8_0KeyGroupBytes(head_dim);
}

}  // namespace

void StoreQ8_0KeySlot(const uint8_t* row, int head_dim, int slot, uint8_t* block) {
  const int nb = head_dim / 32, n = slot % kQ8_0KeyGroupSlots;
  uint8_t* group = KeyGroup(block, head_dim, slot);
  uint8_t* quants = group + Q8_0KeyGroupQuantsOffset(head_dim);
  for (int b = 0; b < nb; ++b) {
    const uint8_t* src = row + b * kRowBlockBytes;
    std::memcpy(group + (static_cast<size_t>(b) * kQ8_0KeyGroupSlots + n) * kScaleBytes, src, kScaleBytes);
    for (int kk = 0; kk < 8; ++kk) {
      uint8_t* dst = quants + static_cast<size_t>(b) * 512 + kk * 64 + n * 4;
      for (int t = 0; t < 4; ++t) {
        dst[t] = static_cast<uint8_t>(static_cast<int8_t>(src[kScaleBytes + 4 * kk + t]) + 128);
      }
    }
  }
}

void LoadQ8_0KeySlot(const uint8_t* block, int head_dim, int slot, uint8_t* row) {
  const int nb = head_dim / 32, n = slot % kQ8_0KeyGroupSlots;
  const uint8_t* group = KeyGroup(block, head_dim, slot);
  const uint8_t* quants = group + Q8_0KeyGroupQuantsOffset(head_dim);
  for (int b = 0; b < nb; ++b) {
    uint8_t* dst = row + b * kRowBlockBytes;
    std::memcpy(dst, group + (static_cast<size_t>(b) * kQ8_0KeyGroupSlots + n) * kScaleBytes, kScaleBytes);
    for (int kk = 0; kk < 8; ++kk) {
      const uint8_t* src = quants + static_cast<size_t>(b) * 512 + kk * 64 + n * 4;
      for (int t = 0; t < 4; ++t) dst[kScaleBytes + 4 * kk + t] = static_cast<uint8_t>(src[t] - 128);
    }
  }
}

void StoreQ8_0ValueSlot(const uint8_t* row, int head_dim, int page_tokens, int slot, uint8_t* block) {
  const int nb = head_dim / 32;
  uint8_t* quants = block + Q8_0ValueQuantsOffset(head_dim, page_tokens) + static_cast<size_t>(slot) * head_dim;
  for (int b = 0; b < nb; ++b) {
    const uint8_t* src = row + b * kRowBlockBytes;
    std::memcpy(block + (static_cast<size_t>(b) * page_tokens + slot) * kScaleBytes, src, kScaleBytes);
    std::memcpy(quants + b * 32, src + kScaleBytes, 32);
  }
}

void LoadQ8_0ValueSlot(const uint8_t* block, int head_dim, int page_tokens, int slot, uint8_t* row) {
  const int nb = head_dim / 32;
  const uint8_t* quants =
      block + Q8_0ValueQuantsOffset(head_dim, page_tokens) + static_cast<size_t>(slot) * head_dim;
  for (int b = 0; b < nb; ++b) {
    uint8_t* dst = row + b * kRowBlockBytes;
    std::memcpy(dst, block + (static_cast<size_t>(b) * page_tokens + slot) * kScaleBytes, kScaleBytes);
    std::memcpy(dst + kScaleBytes, quants + b * 32, 32);
  }
}

void Q8_0KeyBlockFromRows(const uint8_t* rows, int n_slots, int head_dim, uint8_t* block) {
  for (int s = 0; s < n_slots; ++s) StoreQ8_0KeySlot(rows + s * RowBytes(head_dim), head_dim, s, block);
}

void Q8_0KeyBlockToRows(const uint8_t* block, int n_slots, int head_dim, uint8_t* rows) {
  for (int s = 0; s < n_slots; ++s) LoadQ8_0KeySlot(block, head_dim, s, rows + s * RowBytes(head_dim));
}

void Q8_0ValueBlockFromRows(const uint8_t* rows, int n_slots, int head_dim, int page_tokens, uint8_t* block) {
  for (int s = 0; s < n_slots; ++s) {
    StoreQ8_0ValueSlot(rows + s * RowBytes(head_dim), head_dim, page_tokens, s, block);
  }
}

void Q8_0ValueBlockToRows(const uint8_t* block, int n_slots, int head_dim, int page_tokens, uint8_t* rows) {
  for (int s = 0; s < n_slots; ++s) {
    LoadQ8_0ValueSlot(block, head_dim, page_tokens, s, rows + s * RowBytes(head_dim));
  }
}

void Q8_0KeyGroupToPacked(const uint8_t* group, int head_dim, uint8_t* packed) {
  const size_t scales = Q8_0KeyGroupQuantsOffset(head_dim), quants = Q8_0KeyGroupBytes(head_dim) - scales;
  const size_t padded = PackedQ8_0GroupBytes(head_dim) - quants;
  std::memcpy(packed, group, scales);
  if (padded > scales) std::memset(packed + scales, 0, padded - scales);
  std::memcpy(packed + padded, group + scales, quants);
}

}  // namespace kvs
