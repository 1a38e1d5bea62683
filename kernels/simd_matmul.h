// Generic SIMD matmul machinery, instantiated once per instruction set by
// matmul_avx2.cc / matmul_avx512.cc (and the quantized-path files) with the
// vector operations V of simd_avx2.h / simd_avx512.h.
//
// Exact path: a weight loader W (PlainValues, Q8_0Weights, ...) reads a row of its GGUF type as blocks of
// W::kBlock values, each block as W::kBlock / V::kLanes vectors of F32
// values bit-identical to the scalar DequantizeRow. A dot-product tile
// multiplies R weight rows by C activation rows; the value for (row r,
// activation j) is always accumulated in one vector register by one FMA per
// V::kLanes values in increasing k, with a zero-padded last vector for
// columns that are not a multiple of V::kLanes, then summed by V::Sum. That
// sequence does not depend on R, C, nx, or whether the weights came from
// the file (fused dequantization) or from scratch (dequantized once and
// reused): this is what makes every kernel here batch-invariant.
//
// Include only from SIMD translation units: everything is in an anonymous
// namespace (the ODR rule in cpu_features.h); `inline` on the plain helpers
// only tells the compiler a file may leave them unused.
#ifndef KVSESSION_KERNELS_SIMD_MATMUL_H_
#define KVSESSION_KERNELS_SIMD_MATMUL_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/kernel_table.h"
#include "kernels/quant_blocks.h"

namespace kvs {
namespace {

using kernel_table::QuantizedRows;
using kernel_table::WeightRows;

// ---------------------------------------------------------------- tiling

// Calls tile.template operator()<R, C>(r, j) for tiles covering activation
// rows [0, nx): full tiles of kC, then one of the remainder.
template <int R, int C, class Tile>
void RemainderColTile(int64_t r, int j, int left, const Tile& tile) {
  if constexpr (C > 0) {
    if (left == C) {
      tile.template operator()<R, C>(r, j);
    } else {
      RemainderColTile<R, C - 1>(r, j, left, tile);
    }
  }
}

template <int R, int kC, class Tile>
void ColTiles(int64_t r, int nx, const Tile& tile) {
  int j = 0;
  for (; j + kC <= nx; j += kC) tile.template operator()<R, kC>(r, j);
  if (j < nx) RemainderColTile<R, kC - 1>(r, j, nx - j, tile);
}

// Tiles of kR weight rows (single rows for the remainder) by kC activation
// rows over [r0, r1) x [0, nx).
template <int kR, int kC, class Tile>
void Tiles(int64_t r0, int64_t r1, int nx, const Tile& tile) {
  int64_t r = r0;
  for (; r + kR <= r1; r += kR) ColTiles<kR, kC>(r, nx, tile);
  for (; r < r1; ++r) ColTiles<1, kC>(r, nx, tile);
}

// ------------------------------------------------------------ prefetch

// How far ahead of the kernel each weight row is prefetched. Decode streams
// weights from DRAM with few instructions per byte only when enough cache
// misses are in flight; the quantized kernels do too much work per byte for
// the out-of-order window alone to keep them there.
constexpr size_t kPrefetchBytes = 8192;

// Prefetches the cache lines of [p, p + bytes), skipping none.
inline void PrefetchLines(const uint8_t* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 3);
}

// ------------------------------------------------------- weight loaders

// Scale and min (6 bits each) of the 8 sub-blocks of a Q4_K block.
inline void UnpackQ4KScales(const uint8_t* q, uint8_t scale[8], uint8_t min[8]) {
  for (int j = 0; j < 4; ++j) {
    scale[j] = q[j] & 63;
    min[j] = q[j + 4] & 63;
    scale[j + 4] = static_cast<uint8_t>((q[j + 8] & 0xF) | ((q[j] >> 6) << 4));
    min[j + 4] = static_cast<uint8_t>((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
  }
}

// Plain types (F32, F16, BF16) as weights or activations: one vector per
// block, and a zero-padded tail.
enum class Plain { kF32, kF16, kBF16 };

template <class V, Plain kKind>
struct PlainValues {
  using F = typename V::F;
  using T = std::conditional_t<kKind == Plain::kF32, float, uint16_t>;
  static constexpr int kBlock = V::kLanes;
  using Block = const T*;

  static F Load(const T* p) {
    if constexpr (kKind == Plain::kF32) return V::Load(p);
    if constexpr (kKind == Plain::kF16) return V::LoadF16(p);
    if constexpr (kKind == Plain::kBF16) return V::LoadBf16(p);
  }
  static F LoadPartial(const T* p, int n) {
    if constexpr (kKind == Plain::kF32) return V::LoadPartial(p, n);
    if constexpr (kKind == Plain::kF16) return V::LoadF16Partial(p, n);
    if constexpr (kKind == Plain::kBF16) return V::LoadBf16Partial(p, n);
  }
  static Block Begin(const uint8_t* row, int64_t b) {
    return reinterpret_cast<const T*>(row) + b * kBlock;
  }
  static F Chunk(Block p, int) { return Load(p); }
  static F Tail(const uint8_t* row, int64_t k, int n) {
    return LoadPartial(reinterpret_cast<const T*>(row) + k, n);
  }
};

template <class V>
using F32Values = PlainValues<V, Plain::kF32>;
template <class V>
using F16Values = PlainValues<V, Plain::kF16>;
template <class V>
using Bf16Values = PlainValues<V, Plain::kBF16>;

// Blocks of 32 values with one F16 scale d (Q8_0, Q4_0).
template <class V, class BlockT>
struct Scaled32Weights {
  using F = typename V::F;
  static constexpr int kBlock = 32;
  struct Block {
    const BlockT* blk;
    float d;
  };
  static Block Begin(const uint8_t* row, int64_t b) {
    const BlockT* blk = reinterpret_cast<const BlockT*>(row) + b;
    return {blk, V::HalfToFloat(blk->d)};
  }
};

// w = d * q
template <class V>
struct Q8_0Weights : Scaled32Weights<V, BlockQ8_0> {
  using typename Scaled32Weights<V, BlockQ8_0>::Block;
  static typename V::F Chunk(const Block& s, int c) {
    return V::Mul(V::Set1(s.d), V::LoadI8(s.blk->qs + c * V::kLanes));
  }
};

// w = d * (nibble - 8); values 0..15 in the low nibbles, 16..31 in the high.
template <class V>
struct Q4_0Weights : Scaled32Weights<V, BlockQ4_0> {
  using typename Scaled32Weights<V, BlockQ4_0>::Block;
  static typename V::F Chunk(const Block& s, int c) {
    const int k = c * V::kLanes;
    const typename V::F q = V::LoadNibbles(s.blk->qs + k % 16, k < 16 ? 0 : 4);
    return V::Mul(V::Set1(s.d), V::Sub(q, V::Set1(8.0f)));
  }
};

// w = (d * scale) * nibble - dmin * min per sub-block of 32.
template <class V>
struct Q4_KWeights {
  using F = typename V::F;
  static constexpr int kBlock = kQK_K;
  struct Block {
    const uint8_t* qs;
    float scale[8];
    float min[8];
  };
  static Block Begin(const uint8_t* row, int64_t b) {
    const BlockQ4_K* blk = reinterpret_cast<const BlockQ4_K*>(row) + b;
    Block s;
    s.qs = blk->qs;
    const float d = V::HalfToFloat(blk->d), dmin = V::HalfToFloat(blk->dmin);
    uint8_t sc[8], m[8];
    UnpackQ4KScales(blk->scales, sc, m);
    for (int j = 0; j < 8; ++j) {
      s.scale[j] = d * sc[j];
      s.min[j] = dmin * m[j];
    }
    return s;
  }
  static F Chunk(const Block& s, int c) {
    const int k = c * V::kLanes;
    const int sub = k / 32;
    const F q = V::LoadNibbles(s.qs + 32 * (sub / 2) + k % 32, 4 * (sub % 2));
    return V::Sub(V::Mul(V::Set1(s.scale[sub]), q), V::Set1(s.min[sub]));
  }
};

// w = (d * scale) * (q6 - 32) per sub-block of 16. Within each half of 128
// values, value l + 32 * g takes its low four bits from ql[l + 32 * (g & 1)]
// (low nibble for g < 2) and its high two bits from qh[l] bits 2g..2g+1.
template <class V>
struct Q6_KWeights {
  using F = typename V::F;
  static constexpr int kBlock = kQK_K;
  struct Block {
    const uint8_t* ql;
    const uint8_t* qh;
    float scale[16];
  };
  static Block Begin(const uint8_t* row, int64_t b) {
    const BlockQ6_K* blk = reinterpret_cast<const BlockQ6_K*>(row) + b;
    Block s;
    s.ql = blk->ql;
    s.qh = blk->qh;
    const float d = V::HalfToFloat(blk->d);
    for (int j = 0; j < 16; ++j) s.scale[j] = d * blk->scales[j];
    return s;
  }
  static F Chunk(const Block& s, int c) {
    const int k = c * V::kLanes;
    const int half = k / 128, g = (k % 128) / 32, l = k % 32;
    const F q = V::LoadQ6(s.ql + 64 * half + l + 32 * (g & 1), 4 * (g >> 1), s.qh + 32 * half + l,
                          2 * g);
    return V::Mul(V::Set1(s.scale[k / 16]), q);
  }
};

// ------------------------------------------------------- exact kernels

// Bytes of activation rows the GEMM kernels keep hot while weight rows pass.
constexpr int64_t kXBlockBytes = 256 * 1024;

// y0[j * ys + i] = W[i] . x0[j] for i < R, j < C (see the header comment for
// the summation order).
template <class V, class W, class X, int R, int C>
void DotTile(const uint8_t* w0, size_t row_bytes, int64_t cols, const typename X::T* x0,
             int64_t xs, float* y0, int64_t ys) {
  using F = typename V::F;
  constexpr int kChunks = W::kBlock / V::kLanes;
  F acc[R][C];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) acc[i][j] = V::Zero();
  }
  const int64_t nb = cols / W::kBlock;
  const size_t block_bytes = nb > 0 ? row_bytes / nb : 0;
  for (int64_t b = 0; b < nb; ++b) {
    typename W::Block blk[R];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      PrefetchLines(w0 + i * row_bytes + b * block_bytes + kPrefetchBytes, block_bytes);
      blk[i] = W::Begin(w0 + i * row_bytes, b);
    }
    const typename X::T* xb = x0 + b * W::kBlock;
#pragma GCC unroll 16
    for (int c = 0; c < kChunks; ++c) {
      F wv[R];
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) wv[i] = W::Chunk(blk[i], c);
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j) {
        const F xv = X::Load(xb + j * xs + c * V::kLanes);
#pragma GCC unroll 16
        for (int i = 0; i < R; ++i) acc[i][j] = V::Fma(wv[i], xv, acc[i][j]);
      }
    }
  }
  if constexpr (W::kBlock == V::kLanes) {  // plain types: zero-padded tail
    const int tail = static_cast<int>(cols - nb * W::kBlock);
    if (tail > 0) {
      const int64_t k = nb * W::kBlock;
      F wv[R];
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) wv[i] = W::Tail(w0 + i * row_bytes, k, tail);
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j) {
        const F xv = X::LoadPartial(x0 + j * xs + k, tail);
#pragma GCC unroll 16
        for (int i = 0; i < R; ++i) acc[i][j] = V::Fma(wv[i], xv, acc[i][j]);
      }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) y0[j * ys + i] = V::Sum(acc[i][j]);
  }
}

// One row of W as F32 (bit-identical to the scalar DequantizeRow).
template <class V, class W>
void DequantizeWith(const uint8_t* row, float* out, int64_t n) {
  constexpr int kChunks = W::kBlock / V::kLanes;
  const int64_t nb = n / W::kBlock;
  for (int64_t b = 0; b < nb; ++b) {
    const typename W::Block blk = W::Begin(row, b);
#pragma GCC unroll 16
    for (int c = 0; c < kChunks; ++c) V::Store(out + b * W::kBlock + c * V::kLanes, W::Chunk(blk, c));
  }
  if constexpr (W::kBlock == V::kLanes) {
    const int tail = static_cast<int>(n - nb * W::kBlock);
    if (tail > 0) V::StorePartial(out + nb * W::kBlock, W::Tail(row, nb * W::kBlock, tail), tail);
  }
}

// y[j * ys + r] = W[r] . x[j] for r in [r0, r1), j < nx, activations read by X.
// Up to V::kFusedMaxX activation rows, or without scratch: weights
// dequantized in registers. Otherwise V::kGemmRows weight rows at a time are
// dequantized into scratch once and reused for every activation row (same
// values, same order: see the header comment).
template <class V, class W, class X>
void MatmulWith(const WeightRows& w, int64_t r0, int64_t r1, const typename X::T* x, int nx,
                int64_t xs, float* y, int64_t ys, float* scratch) {
  auto fused = [&]<int R, int C>(int64_t r, int j) {
    DotTile<V, W, X, R, C>(w.data + r * w.row_bytes, w.row_bytes, w.cols, x + j * xs, xs,
                           y + j * ys + r, ys);
  };
  if (nx <= V::kFusedMaxX) {
    Tiles<V::kGemvRows, V::kFusedMaxX>(r0, r1, nx, fused);
    return;
  }
  // Activation rows in blocks of about kXBlockBytes, so a block stays in L2
  // while every weight row passes over it.
  const int64_t x_row_bytes = static_cast<int64_t>(w.cols) * static_cast<int64_t>(sizeof(typename X::T));
  int x_block = static_cast<int>(kXBlockBytes / (x_row_bytes > 0 ? x_row_bytes : 1));
  x_block = x_block < V::kGemmCols ? V::kGemmCols : x_block / V::kGemmCols * V::kGemmCols;
  for (int jb = 0; jb < nx; jb += x_block) {
    const int nj = nx - jb < x_block ? nx - jb : x_block;
    const typename X::T* xb = x + jb * xs;
    float* yb = y + jb * ys;
    if (scratch == nullptr) {
      auto tile = [&]<int R, int C>(int64_t r, int j) {
        DotTile<V, W, X, R, C>(w.data + r * w.row_bytes, w.row_bytes, w.cols, xb + j * xs, xs,
                               yb + j * ys + r, ys);
      };
      Tiles<V::kGemmRows, V::kGemmCols>(r0, r1, nj, tile);
      continue;
    }
    const size_t scratch_row_bytes = static_cast<size_t>(w.cols) * sizeof(float);
    auto from_scratch = [&](int64_t r, int rows) {
      for (int i = 0; i < rows; ++i) {
        DequantizeWith<V, W>(w.data + (r + i) * w.row_bytes, scratch + i * w.cols, w.cols);
      }
      auto tile = [&]<int R, int C>(int64_t, int j) {
        DotTile<V, F32Values<V>, X, R, C>(reinterpret_cast<const uint8_t*>(scratch),
                                          scratch_row_bytes, w.cols, xb + j * xs, xs,
                                          yb + j * ys + r, ys);
      };
      if (rows == V::kGemmRows) {
        ColTiles<V::kGemmRows, V::kGemmCols>(r, nj, tile);
      } else {
        ColTiles<1, V::kGemmCols>(r, nj, tile);
      }
    };
    int64_t r = r0;
    for (; r + V::kGemmRows <= r1; r += V::kGemmRows) from_scratch(r, V::kGemmRows);
    for (; r < r1; ++r) from_scratch(r, 1);
  }
}

// The table's exact entries (F32 activations). F32 weights are read in
// place (no scratch); the others go through scratch for many rows.
template <class V, class W>
void MatmulExact(const WeightRows& w, int64_t r0, int64_t r1, const float* x, int nx,
                 int64_t x_stride, float* y, int64_t y_stride, float* scratch) {
  constexpr bool kInPlace = __is_same(W, F32Values<V>);
  MatmulWith<V, W, F32Values<V>>(w, r0, r1, x, nx, x_stride, y, y_stride,
                               kInPlace ? nullptr : scratch);
}

// Fast-path entries for F32/F16/BF16 weights: activations stored as F32,
// F16 or BF16 rows by QuantizeActivations, products and sums in F32,
// weights converted in registers.
template <class V, class W, class X>
void MatmulFloatActs(const WeightRows& w, int64_t r0, int64_t r1, const QuantizedRows& x, int nx,
                     float* y, int64_t y_stride) {
  using T = typename X::T;
  MatmulWith<V, W, X>(w, r0, r1, reinterpret_cast<const T*>(x.data), nx,
                      static_cast<int64_t>(x.row_bytes / sizeof(T)), y, y_stride, nullptr);
}

// ------------------------------------------------- quantized-path driver

// One activation row of the integer fast path.
struct QuantizedActRow {
  const int8_t* q;       // int8 values
  const float* d;        // one scale per block
  const int16_t* sums;   // sums of 16 consecutive values (K-quant weights)
};

inline QuantizedActRow ActRow(const QuantizedRows& x, int j) {
  const uint8_t* row = x.data + static_cast<size_t>(j) * x.row_bytes;
  return {reinterpret_cast<const int8_t*>(row), reinterpret_cast<const float*>(row + x.scales_offset),
          reinterpret_cast<const int16_t*>(row + x.sums_offset)};
}

// The integer kernels K supply K::Steps(cols) and
// K::Step<R, C>(w_rows, act_rows, step, cols, acc), which folds one step of
// blocks of R weight rows times C activation rows into the F32
// accumulators acc[i][j]; the driver sums each accumulator with V::Sum.
// Every (i, j) sees the same sequence of operations whatever R and C are.
template <class V, class K, int R, int C>
void QuantizedDotTile(const WeightRows& w, int64_t r, const QuantizedRows& x, int j0, float* y,
                      int64_t ys) {
  typename V::F acc[R][C];
  const uint8_t* wr[R];
  QuantizedActRow xr[C];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    wr[i] = w.data + (r + i) * w.row_bytes;
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) acc[i][j] = V::Zero();
  }
#pragma GCC unroll 16
  for (int j = 0; j < C; ++j) xr[j] = ActRow(x, j0 + j);
  const int64_t steps = K::Steps(w.cols);
  const size_t step_bytes = steps > 0 ? w.row_bytes / steps : 0;
  for (int64_t s = 0; s < steps; ++s) {
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) PrefetchLines(wr[i] + s * step_bytes + kPrefetchBytes, step_bytes);
    K::template Step<R, C>(wr, xr, s, w.cols, acc);
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) y[(j0 + j) * ys + r + i] = V::Sum(acc[i][j]);
  }
}

template <class V, class K>
void MatmulQuantizedWith(const WeightRows& w, int64_t r0, int64_t r1, const QuantizedRows& x,
                         int nx, float* y, int64_t y_stride) {
  if (nx == 1) {
    auto tile = [&]<int R, int C>(int64_t r, int j) {
      QuantizedDotTile<V, K, R, C>(w, r, x, j, y, y_stride);
    };
    Tiles<K::kGemvRows, 1>(r0, r1, nx, tile);
    return;
  }
  // Activation rows in blocks that stay in L2 (see MatmulWith).
  int x_block = static_cast<int>(kXBlockBytes / static_cast<int64_t>(x.row_bytes > 0 ? x.row_bytes : 1));
  x_block = x_block < K::kGemmCols ? K::kGemmCols : x_block / K::kGemmCols * K::kGemmCols;
  for (int jb = 0; jb < nx; jb += x_block) {
    auto tile = [&]<int R, int C>(int64_t r, int j) {
      QuantizedDotTile<V, K, R, C>(w, r, x, jb + j, y, y_stride);
    };
    Tiles<K::kGemmRows, K::kGemmCols>(r0, r1, nx - jb < x_block ? nx - jb : x_block, tile);
  }
}

// ------------------------------------------------------ table entries

// The entries every instruction set fills the same way: exact matmul and
// dequantization for every type, and the fast path for F32/F16/BF16 weights.
template <class V>
void FillFloatMatmulEntries(kernel_table::KernelTable* t) {
  namespace kt = kernel_table;
  t->matmul[kt::kF32] = MatmulExact<V, F32Values<V>>;
  t->matmul[kt::kF16] = MatmulExact<V, F16Values<V>>;
  t->matmul[kt::kBF16] = MatmulExact<V, Bf16Values<V>>;
  t->matmul[kt::kQ8_0] = MatmulExact<V, Q8_0Weights<V>>;
  t->matmul[kt::kQ4_0] = MatmulExact<V, Q4_0Weights<V>>;
  t->matmul[kt::kQ4_K] = MatmulExact<V, Q4_KWeights<V>>;
  t->matmul[kt::kQ6_K] = MatmulExact<V, Q6_KWeights<V>>;
  t->dequantize[kt::kF16] = DequantizeWith<V, F16Values<V>>;
  t->dequantize[kt::kBF16] = DequantizeWith<V, Bf16Values<V>>;
  t->dequantize[kt::kQ8_0] = DequantizeWith<V, Q8_0Weights<V>>;
  t->dequantize[kt::kQ4_0] = DequantizeWith<V, Q4_0Weights<V>>;
  t->dequantize[kt::kQ4_K] = DequantizeWith<V, Q4_KWeights<V>>;
  t->dequantize[kt::kQ6_K] = DequantizeWith<V, Q6_KWeights<V>>;
  t->matmul_quantized[kt::kF32] = MatmulFloatActs<V, F32Values<V>, F32Values<V>>;
  t->matmul_quantized[kt::kF16] = MatmulFloatActs<V, F16Values<V>, F16Values<V>>;
  t->matmul_quantized[kt::kBF16] = MatmulFloatActs<V, Bf16Values<V>, Bf16Values<V>>;
}

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_SIMD_MATMUL_H_
