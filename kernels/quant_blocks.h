// Block layouts of the quantized ggml weight formats, as stored in GGUF
// files (little-endian, packed, no padding).
//
//   Q8_0: 32 weights = d (f16) * q[i] (int8).
//   Q4_0: 32 weights = d (f16) * (nibble - 8); byte j holds weight j in its
//         low nibble and weight j+16 in its high nibble.
//   Q4_K: 256 weights in 8 sub-blocks of 32; each sub-block has a 6-bit
//         scale and a 6-bit min packed in `scales`; weight =
//         d*scale*nibble - dmin*min. `qs` byte j of 32-byte group g holds
//         sub-block 2g (low nibble) and 2g+1 (high nibble).
//   Q6_K: 256 weights in 16 sub-blocks of 16 with int8 scales; 6-bit
//         values = 4 low bits from `ql` and 2 high bits from `qh`, minus 32.
#ifndef KVSESSION_KERNELS_QUANT_BLOCKS_H_
#define KVSESSION_KERNELS_QUANT_BLOCKS_H_

#include <cstdint>

namespace kvs {

constexpr int kQK8_0 = 32;
constexpr int kQK4_0 = 32;
constexpr int kQK_K = 256;

struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// Scale and min of sub-block j (0..7) of a Q4_K block: the first four
// sub-blocks keep 6 bits in the low bits of bytes 0..3 (scale) and 4..7
// (min); the last four combine a nibble of bytes 8..11 with the top two bits
// of bytes 0..7.
inline void Q4KScaleMin(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

}  // namespace kvs

#endif  // KVSESSION_KERNELS_QUANT_BLOCKS_H_
