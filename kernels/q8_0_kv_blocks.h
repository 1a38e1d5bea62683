// Q8_0 KV blocks in the order a decode row reads without gathers: the
// layout of the (layer, k|v, head) blocks of a q8_0 page in RAM and in a
// full page on disk (cache/kv_geometry.h: T slots of head_dim values;
// page format 3, cache/page_codec.h), and the conversions between it and
// GGUF's Q8_0 rows (a row is nb = head_dim / 32
// blocks of an F16 scale d and 32 int8 quants q, 34 bytes a block).
// docs/performance/zen5.md, "Q8_0 pages with the keys packed and the values'
// scales apart", has the measurements that chose it.
//
// Keys: one packed group per 16 slots (T a multiple of 16). Group g holds
// slots [16g, 16g + 16):
//   scales  F16 [nb][16]             d of block b of slot 16g + n at [b][n]
//   quants  uint8 [nb][8][16][4]     q + 128 of value 32b + 4kk + t of
//                                     slot 16g + n at [b][kk][n][t]
// nb * 544 bytes, the bytes of its 16 rows. These are packed_q8_0.h's
// bytes with the scales unpadded: for an even nb (head_dim 64, 128, 256)
// exactly PackQ8_0's group, so the packed kernels multiply a key group in
// place; for an odd nb the quants start nb * 32 bytes in, not at the next
// 64 bytes.
// Values: the T slots' scales, then their quants as rows:
//   scales  F16 [nb][T]              d of block b of slot s at [b][s]
//   quants  int8 [T][head_dim]       slot s's values in order
// T * nb * 34 bytes, the bytes of its T rows.
//
// So both blocks keep their size (KvGeometry::block_bytes() is unchanged),
// and every function here is exact: a row stored and loaded back is the
// same 34 * nb bytes.
//
// Contract: pure, thread-safe; the caller owns every buffer, which may lie
// at any address. head_dim is a positive multiple of 32, slots are in
// [0, page_tokens), and page_tokens is a positive multiple of 16 for keys.
#ifndef KVSESSION_KERNELS_Q8_0_KV_BLOCKS_H_
#define KVSESSION_KERNELS_Q8_0_KV_BLOCKS_H_

#include <cstddef>
#include <cstdint>

namespace kvs {

// Slots of one packed key group.
inline constexpr int kQ8_0KeyGroupSlots = 16;

// Bytes of one key group: 16 rows' worth, nb * 544.
inline constexpr size_t Q8_0KeyGroupBytes(int head_dim) {
  return static_cast<size_t>(head_dim / 32) * 544;
}
// Offset of a key group's quants from its start: its nb * 32 bytes of scales.
inline constexpr size_t Q8_0KeyGroupQuantsOffset(int head_dim) {
  return static_cast<size_t>(head_dim / 32) * 32;
}
// Offset of a value block's quants from its start: T * nb F16 scales.
inline constexpr size_t Q8_0ValueQuantsOffset(int head_dim, int page_tokens) {
  return static_cast<size_t>(page_tokens) * static_cast<size_t>(head_dim / 32) * 2;
}

// Where a value block's pieces lie (the kernels read them in place): the
// F16 scale of value block b of slot `slot`, the scales of block b being
// page_tokens F16 from Q8_0ValueScales(block, page_tokens, b); and the
// int8 quants of slot `slot`, head_dim of them (slots head_dim bytes
// apart).
inline const uint8_t* Q8_0ValueScales(const void* block, int page_tokens, int b) {
  return static_cast<const uint8_t*>(block) + static_cast<size_t>(b) * static_cast<size_t>(page_tokens) * 2;
}
inline const int8_t* Q8_0ValueQuants(const void* block, int head_dim, int page_tokens, int slot) {
  return reinterpret_cast<const int8_t*>(static_cast<const uint8_t*>(block) +
                                         Q8_0ValueQuantsOffset(head_dim, page_tokens) +
                                         static_cast<size_t>(slot) * static_cast<size_t>(head_dim));
}

// One slot of a key block from a Q8_0 row (`row`: nb * 34 bytes), and
// back. The other slots' bytes are not touched.
void StoreQ8_0KeySlot(const uint8_t* row, int head_dim, int slot, uint8_t* block);
void LoadQ8_0KeySlot(const uint8_t* block, int head_dim, int slot, uint8_t* row);

// The same for one slot of a value block of page_tokens slots.
void StoreQ8_0ValueSlot(const uint8_t* row, int head_dim, int page_tokens, int slot, uint8_t* block);
void LoadQ8_0ValueSlot(const uint8_t* block, int head_dim, int page_tokens, int slot, uint8_t* row);

// Slots [0, n_slots) of a block from n_slots rows stored one after another
// (`rows`), and back into `rows` (n_slots * nb * 34 bytes), as the slot
// functions do one at a time.
void Q8_0KeyBlockFromRows(const uint8_t* rows, int n_slots, int head_dim, uint8_t* block);
void Q8_0KeyBlockToRows(const uint8_t* block, int n_slots, int head_dim, uint8_t* rows);
void Q8_0ValueBlockFromRows(const uint8_t* rows, int n_slots, int head_dim, int page_tokens, uint8_t* block);
void Q8_0ValueBlockToRows(const uint8_t* block, int n_slots, int head_dim, int page_tokens, uint8_t* rows);

// One key group (Q8_0KeyGroupBytes) as packed_q8_0.h's group
// (PackedQ8_0GroupBytes(head_dim) bytes at `packed`): the same scales,
// zero padding up to 64 bytes, the same quants. For an even nb, a copy.
void Q8_0KeyGroupToPacked(const uint8_t* group, int head_dim, uint8_t* packed);

}  // namespace kvs

#endif  // KVSESSION_KERNELS_Q8_0_KV_BLOCKS_H_
