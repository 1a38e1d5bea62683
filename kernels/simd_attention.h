// Generic SIMD attention kernels (the contract is AttentionUpdateBlocks in
// attention.h), instantiated by attention_avx2.cc / attention_avx512.cc with
// the vector operations of simd_avx2.h / simd_avx512.h.
//
// AttentionBlocksWith folds a row's whole visible context in one
// online-softmax step: BlockScores for every key of every block (K read in
// place, F16 / BF16 converted to F32 in registers by LoadKvLanes, exactly;
// Q8_0 keys scored in integers against the query rounded to Q8_0,
// attention_q8_0_scores.h), one rescale, then one pass over the values
// (Q8_0 values by simd_attention_q8_0_values.h). Head sizes of 1, 2, 4, 8
// or 16 vectors keep the value accumulator in registers
// (AttentionBlocksFixed); other sizes take the fallback
// (AttentionBlocksOneStep: the same single step, the values read in place
// 4 vectors at a time; docs/performance/kv-types.md, "Q8_0 caches on heads without
// a fixed kernel"). Every kernel, tiles included, takes the step in
// SoftmaxStep. Every query (row r, head h) is computed on its own, so its
// result depends only on its own inputs, not on how many rows or heads
// share the call.
//
// Include only from SIMD translation units: everything is in an anonymous
// namespace (the ODR rule in cpu_features.h).
#ifndef KVSESSION_KERNELS_SIMD_ATTENTION_H_
#define KVSESSION_KERNELS_SIMD_ATTENTION_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/attention_q8_0_scores.h"
#include "kernels/attention_tile.h"
#include "kernels/kernel_table.h"
#include "kernels/kv_dtype.h"
#include "kernels/simd_attention_q8_0_values.h"
#include "kernels/simd_exp.h"

namespace kvs {
namespace {

template <class V>
void ConvertF16(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) V::Store(dst + i, V::LoadF16(src + i));
  if (i < n) V::StorePartial(dst + i, V::LoadF16Partial(src + i, static_cast<int>(n - i)), static_cast<int>(n - i));
}

template <class V>
void ConvertToF16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) V::StoreF16(dst + i, V::Load(src + i));
  if (i < n) {
    const int left = static_cast<int>(n - i);
    V::StoreF16Partial(dst + i, V::LoadPartial(src + i, left), left);
  }
}

// Bytes of one row of hd values of type kT.
template <KvDtype kT>
constexpr size_t RowBytes(int hd) {
  return KvBytes(kT, hd);
}

// Values of a row from a multiple of which on one scale holds: a q8_0
// block; the whole row for the other types, which have no scale.
template <KvDtype kT>
inline constexpr int kKvScaleSpan = kT == KvDtype::kQ8_0 ? kKvQ8_0BlockValues : (1 << 30);

// The row functions below read F32, F16 and BF16 rows. A q8_0 cache's
// blocks are not rows (kernels/q8_0_kv_blocks.h): its keys are scored by
// ScoresQ8_0 and its values folded by simd_attention_q8_0_values.h.
template <KvDtype kT>
inline constexpr bool kKvRows = kT != KvDtype::kQ8_0;

// The scale of the block that holds value d of row `row`: V::Zero() for
// the row types, which have none (the generic kernels' loops keep the
// scale-span structure of their q8_0 ancestors).
template <class V, KvDtype kT>
typename V::F LoadKvScale(const void*, size_t, int, int) {
  static_assert(kKvRows<kT>, "q8_0 blocks are not rows");
  return V::Zero();
}

// LoadKvLanes given LoadKvScale's result (unused by the row types).
template <class V, KvDtype kT>
typename V::F LoadKvLanesScaled(const void* base, size_t row, int d, int hd, typename V::F) {
  static_assert(kKvRows<kT>, "q8_0 blocks are not rows");
  if constexpr (kT == KvDtype::kF32) {
    return V::Load(static_cast<const float*>(base) + row * hd + d);
  } else if constexpr (kT == KvDtype::kF16) {
    return V::LoadF16(static_cast<const uint16_t*>(base) + row * hd + d);
  } else {
    return V::LoadBf16(static_cast<const uint16_t*>(base) + row * hd + d);
  }
}

// Loads kLanes values of row `row` (rows of hd values of type kT from
// `base`) from value d on, converted to F32 in registers (exactly). d is a
// multiple of kLanes.
template <class V, KvDtype kT>
typename V::F LoadKvLanes(const void* base, size_t row, int d, int hd) {
  return LoadKvLanesScaled<V, kT>(base, row, d, hd, LoadKvScale<V, kT>(base, row, d, hd));
}

// The first `width` (<= kLanes) values of LoadKvLanes; the other lanes are
// 0.
template <class V, KvDtype kT>
typename V::F LoadKvPartial(const void* base, size_t row, int d, int hd, int width) {
  static_assert(kKvRows<kT>, "q8_0 blocks are not rows");
  if constexpr (kT == KvDtype::kF32) {
    return V::LoadPartial(static_cast<const float*>(base) + row * hd + d, width);
  } else if constexpr (kT == KvDtype::kF16) {
    return V::LoadF16Partial(static_cast<const uint16_t*>(base) + row * hd + d, width);
  } else {
    return V::LoadBf16Partial(static_cast<const uint16_t*>(base) + row * hd + d, width);
  }
}

// rows x hd values of type kT to F32 (out: rows * hd floats).
template <class V, KvDtype kT>
void ConvertRows(const void* src, int rows, int hd, float* out) {
  for (int j = 0; j < rows; ++j) {
    int d = 0;
    typename V::F scale = V::Zero();  // q8_0: the block's, converted once
    for (; d + V::kLanes <= hd; d += V::kLanes) {
      if (d % kKvScaleSpan<kT> == 0) scale = LoadKvScale<V, kT>(src, j, d, hd);
      V::Store(out + static_cast<size_t>(j) * hd + d, LoadKvLanesScaled<V, kT>(src, j, d, hd, scale));
    }
    if (d < hd) {
      V::StorePartial(out + static_cast<size_t>(j) * hd + d, LoadKvPartial<V, kT>(src, j, d, hd, hd - d), hd - d);
    }
  }
}

// Calls fn(std::integral_constant<KvDtype, t>{}) for the dtype t.
template <class Fn>
decltype(auto) WithKvDtype(KvDtype t, Fn&& fn) {
  switch (t) {
    case KvDtype::kF16:
      return fn(std::integral_constant<KvDtype, KvDtype::kF16>{});
    case KvDtype::kQ8_0:
      return fn(std::integral_constant<KvDtype, KvDtype::kQ8_0>{});
    case KvDtype::kBF16:
      return fn(std::integral_constant<KvDtype, KvDtype::kBF16>{});
    default:
      return fn(std::integral_constant<KvDtype, KvDtype::kF32>{});
  }
}

// The score kernel: scores[j] = scale * q . k_j for the n keys of one block
// (head_dim hd), read in place. When hd is a multiple of kLanes, kLanes keys
// at a time: kLanes partial dot vectors reduced together (V::TransposeSum)
// instead of one horizontal sum per key; the other keys (and every key for
// other hd) one vector accumulator each, the last vector partial.
// Q8_0 keys are scored as attention_q8_0_scores.h states, with the query
// rounded to Q8_0 (the same bits wherever a key is scored).
template <class V, KvDtype kT>
void BlockScores(const float* q, const void* k, int n, int hd, float scale, float* scores) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  if constexpr (kT == KvDtype::kQ8_0) {
    QueryScoresQ8_0(q, hd, k, n, scale, scores);
    return;
  }
  int j = 0;
  if (hd % L == 0) {
    for (; j + L <= n; j += L) {
      F part[L];
#pragma GCC unroll 16
      for (int t = 0; t < L; ++t) part[t] = V::Zero();
      for (int d = 0; d < hd; d += L) {
        const F qd = V::Load(q + d);
#pragma GCC unroll 16
        for (int t = 0; t < L; ++t) {
          part[t] = V::Fma(qd, LoadKvLanes<V, kT>(k, j + t, d, hd), part[t]);
        }
      }
      V::Store(scores + j, V::Mul(V::TransposeSum(part), V::Set1(scale)));
    }
  }
  for (; j < n; ++j) {
    F a = V::Zero();
    int d = 0;
    for (; d + L <= hd; d += L) a = V::Fma(V::Load(q + d), LoadKvLanes<V, kT>(k, j, d, hd), a);
    if (d < hd) {
      const int width = hd - d;
      a = V::Fma(V::LoadPartial(q + d, width), LoadKvPartial<V, kT>(k, j, d, hd, width), a);
    }
    scores[j] = scale * V::Sum(a);
  }
}

// p[j] = e^(p[j] - max) for j < n; returns their sum.
template <class V>
float ExpInPlace(float* p, int n, float max) {
  const typename V::F m = V::Set1(max);
  typename V::F total = V::Zero();
  int j = 0;
  for (; j + V::kLanes <= n; j += V::kLanes) {
    const typename V::F e = Exp<V>(V::Sub(V::Load(p + j), m));
    V::Store(p + j, e);
    total = V::Add(total, e);
  }
  if (j < n) {
    const int left = n - j;
    const typename V::F e = Exp<V>(V::Sub(V::LoadPartial(p + j, left), m));
    V::StorePartial(p + j, e, left);
    total = V::Add(total, V::LoadPartial(p + j, left));
  }
  return V::Sum(total);
}

// The largest of p[0, n), n >= 1: the value a scalar loop finds (a +0 may
// come back as -0 or the reverse, which no result sees: the max is only
// subtracted from scores before e^x).
template <class V>
float MaxOf(const float* p, int n) {
  constexpr int L = V::kLanes;
  if (n < L) {
    float m = p[0];
    for (int j = 1; j < n; ++j) m = p[j] > m ? p[j] : m;
    return m;
  }
  typename V::F m = V::Load(p);
  int j = L;
  for (; j + L <= n; j += L) m = V::Max(m, V::Load(p + j));
  m = V::Max(m, V::Load(p + n - L));  // the tail, overlapping
  alignas(64) float lanes[L];
  V::Store(lanes, m);
  float out = lanes[0];
  for (int t = 1; t < L; ++t) out = lanes[t] > out ? lanes[t] : out;
  return out;
}

// One query's online-softmax step over its scores[0, n), n >= 1: the
// scores become e^(score - new max), and max and sum move to the new max.
// Returns the factor the query's acc must be multiplied by (~0 on its
// first step). Every kernel takes its step here, so they agree on its bits.
template <class V>
float SoftmaxStep(float* scores, int n, float& max, float& sum) {
  const float block_max = MaxOf<V>(scores, n);
  const float new_max = block_max > max ? block_max : max;
  const float correction = V::First(Exp<V>(V::Set1(max - new_max)));
  sum = sum * correction + ExpInPlace<V>(scores, n, new_max);
  max = new_max;
  return correction;
}

// acc[0, hd) *= factor (hd need not be a multiple of kLanes).
template <class V>
void ScaleRow(float* acc, int hd, float factor) {
  const typename V::F f = V::Set1(factor);
  int d = 0;
  for (; d + V::kLanes <= hd; d += V::kLanes) V::Store(acc + d, V::Mul(V::Load(acc + d), f));
  if (d < hd) V::StorePartial(acc + d, V::Mul(V::LoadPartial(acc + d, hd - d), f), hd - d);
}

// acc[0, kChunks * kLanes) += sum_{j < n} p[j] * v_j, the values read in
// place, the accumulator in registers.
template <class V, KvDtype kT, int kChunks>
void AccumulateInPlace(const float* p, const void* v, int n, float* acc) {
  using F = typename V::F;
  constexpr int L = V::kLanes, hd = kChunks * L;
  F a[kChunks];
#pragma GCC unroll 16
  for (int c = 0; c < kChunks; ++c) a[c] = V::Load(acc + c * L);
  for (int j = 0; j < n; ++j) {
    const F pj = V::Set1(p[j]);
    F scale = V::Zero();  // q8_0: each block's, converted once
#pragma GCC unroll 16
    for (int c = 0; c < kChunks; ++c) {
      if ((c * L) % kKvScaleSpan<kT> == 0) scale = LoadKvScale<V, kT>(v, j, c * L, hd);
      a[c] = V::Fma(pj, LoadKvLanesScaled<V, kT>(v, j, c * L, hd, scale), a[c]);
    }
  }
#pragma GCC unroll 16
  for (int c = 0; c < kChunks; ++c) V::Store(acc + c * L, a[c]);
}

// Asks for a block's cache lines ahead of use: pages of one (layer, head)
// are a page apart in memory, too far for the hardware prefetcher.
inline void PrefetchBlock(const void* block, size_t bytes) {
  const char* p = static_cast<const char*>(block);
  for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 3);
}

// Blocks prefetched ahead of the one being read.
constexpr int kPrefetchBlocks = 4;

// How one pass (the K blocks of a score pass, or the V blocks of a value
// pass) asks for its blocks ahead of use. Only when lines arrive changes,
// never a result.
//  - Whole blocks (tiles over an F32 cache): at each block's start
//    (AtBlock), all the lines of the block kPrefetchBlocks ahead.
//  - Streamed (a decode row's GQA group: little arithmetic per byte; and
//    the tiles that convert their blocks, a Step per micro-tile call: a
//    block's lines at once filled the line-fill buffers and stalled the
//    loads, 13% of an f16 value pass's samples): the
//    first kStreamAheadBlocks blocks at once, then, while block b is read,
//    the lines of block b + kStreamAheadBlocks, a few per Step as the
//    loop's arithmetic goes. Whole blocks left a cold decode row at its
//    in-cache time plus its read time; streamed, a cold row of an f16
//    cache took 1.3-2x less time on Zen 4 and 1.6x less on Zen 3, and of a
//    q8_0 cache 1.45x less on Zen 3 (no change on Zen 4)
//    (docs/performance/decode-and-fan-out.md, "Decode at 4,096: the attention kernel waits",
//    the attention_paged tables). The streamed lines are
//    asked for into L2 (prefetcht2), not L1: a prefetch into L1 holds one
//    of the core's few L1 miss buffers until its line arrives, which capped
//    a thread's scattered reads at about 8 GB/s on Zen 4; into L2, a cold
//    q8_0 decode row took 0.63x the time and f16 and bf16 rows 0.58x
//    (docs/performance/zen4.md, "Decode rows stream their KV into L2"). A Step is a compare and a
//    prefetch per line, its state two pointers: the loop calls it once per
//    key or key group, and a heavier Step (a block index and an offset
//    kept in memory, the block list walked per call) cost a warm f16 row
//    about a fifth of its time (docs/performance/zen3.md, "How long a decode
//    row's reads are").
// One object per pass, on the stack; not thread-safe.
class BlockPrefetch {
 public:
  static constexpr int kStreamAheadBlocks = 2;

  BlockPrefetch(const void* const* blocks, int n_blocks, size_t block_bytes, bool streamed)
      : blocks_(blocks), n_blocks_(n_blocks), block_bytes_(block_bytes), streamed_(streamed) {
    const int first = streamed_ ? kStreamAheadBlocks : kPrefetchBlocks;
    for (int b = 0; b < first && b < n_blocks_; ++b) PrefetchBlock(blocks_[b], block_bytes_);
  }

  // Call at the start of block b. Whole blocks: asks for all the lines of
  // block b + kPrefetchBlocks. Streamed: the next Steps ask for those of
  // block b + kStreamAheadBlocks.
  void AtBlock(int b) {
    if (!streamed_) {
      if (b + kPrefetchBlocks < n_blocks_) PrefetchBlock(blocks_[b + kPrefetchBlocks], block_bytes_);
      return;
    }
    if (b + kStreamAheadBlocks < n_blocks_) {
      next_ = static_cast<const char*>(blocks_[b + kStreamAheadBlocks]);
      end_ = next_ + block_bytes_;
    } else {
      next_ = end_ = nullptr;
    }
  }

  // Streamed: the `lines` for each Step of a loop making `steps` Steps per
  // block (a block's lines per block); 0 (Steps do nothing) otherwise.
  int LinesPerStep(int steps) const {
    if (!streamed_) return 0;
    return steps > 0 ? (Lines() + steps - 1) / steps : Lines();
  }

  // Asks for up to `lines` more lines of the block AtBlock chose.
  // Inlined: a call would spill the caller's vector accumulators.
  __attribute__((always_inline)) void Step(int lines) {
    for (; lines > 0 && next_ < end_; --lines) {
      _mm_prefetch(next_, _MM_HINT_T2);
      next_ += 64;
    }
  }

 private:
  int Lines() const { return static_cast<int>((block_bytes_ + 63) / 64); }

  const void* const* blocks_;
  int n_blocks_;
  size_t block_bytes_;
  bool streamed_;
  const char* next_ = nullptr;  // streamed: the next line to ask for, up to end_
  const char* end_ = nullptr;
};

// One row's heads go through each block together, so a K or V block is
// read from memory once for the whole group and from L1 for the others.
template <class V, KvDtype kT, int kChunks>
void AttentionBlocksFixed(const float* q, int64_t q_row_stride, int rows, int heads,
                          const void* const* k, const void* const* v, int n_blocks, int block_keys,
                          const int* visible, float scale, float* max, float* sum, float* acc,
                          float* scratch) {
  constexpr int hd = kChunks * V::kLanes;
  for (int r = 0; r < rows; ++r) {
    const int n = visible[r] < n_blocks * block_keys ? visible[r] : n_blocks * block_keys;
    if (n <= 0) continue;
    const float* qr = q + r * q_row_stride;
    const int used_blocks = (n + block_keys - 1) / block_keys;
    const size_t block_bytes = static_cast<size_t>(block_keys) * RowBytes<kT>(hd);
    if constexpr (kT == KvDtype::kQ8_0) {  // a whole row of scores per head, keys packed in chunks
      alignas(64) uint8_t query[QueryQ8_0Bytes(hd)];
      for (int h = 0; h < heads; ++h) {
        QuantizeQueryQ8_0(qr + h * hd, hd, scale, query);
        ScoresQ8_0(query, 1, hd, k, block_keys, n, scratch + static_cast<size_t>(h) * n, 0);
      }
    } else {
      for (int b = 0; b < kPrefetchBlocks && b < used_blocks; ++b) PrefetchBlock(k[b], block_bytes);
      for (int b = 0; b * block_keys < n; ++b) {
        const int nb = n - b * block_keys < block_keys ? n - b * block_keys : block_keys;
        if (b + kPrefetchBlocks < used_blocks) PrefetchBlock(k[b + kPrefetchBlocks], block_bytes);
        for (int h = 0; h < heads; ++h) {
          BlockScores<V, kT>(qr + h * hd, k[b], nb, hd, scale, scratch + static_cast<size_t>(h) * n + b * block_keys);
        }
      }
    }
    for (int h = 0; h < heads; ++h) {
      const int i = r * heads + h;
      const float correction = SoftmaxStep<V>(scratch + static_cast<size_t>(h) * n, n, max[i], sum[i]);
      ScaleRow<V>(acc + static_cast<size_t>(i) * hd, hd, correction);
    }
    for (int b = 0; b < kPrefetchBlocks && b < used_blocks; ++b) PrefetchBlock(v[b], block_bytes);
    for (int b = 0; b * block_keys < n; ++b) {
      const int nb = n - b * block_keys < block_keys ? n - b * block_keys : block_keys;
      if (b + kPrefetchBlocks < used_blocks) PrefetchBlock(v[b + kPrefetchBlocks], block_bytes);
      for (int h = 0; h < heads; ++h) {
        const float* p = scratch + static_cast<size_t>(h) * n + b * block_keys;
        float* acc_h = acc + static_cast<size_t>(r * heads + h) * hd;
        if constexpr (kT == KvDtype::kQ8_0) {
          // (Heads of less than a q8_0 block never meet a q8_0 cache.)
          if constexpr (hd % kKvQ8_0BlockValues == 0) AccumulateInPlaceQ8_0<V, kChunks>(p, v[b], block_keys, nb, acc_h);
        } else {
          AccumulateInPlace<V, kT, kChunks>(p, v[b], nb, acc_h);
        }
      }
    }
  }
}

// For each of kQ queries q: acc[q][d0, d0 + kC * kLanes) += the values of
// keys [0, n) of the block at vb, key by key in order, read in place:
// p[q][j] * v_j, or for a q8_0 cache the BF16-rounded weights of
// attention_q8_0_values.h times the int8 quants (weights[q][value block *
// kOneStepWeightKeys + j], from RowWeightsQ8_0; vb is then where key 0's
// quants start, keys hd bytes apart: Q8_0ValueQuants). Each value vector is
// loaded and converted once for the kQ queries; each query's sums are
// those it gets alone (the same products, in the same order).
template <class V, KvDtype kT, int kC, int kQ>
void OneStepValueVectors(const float* const* p, const float* const* weights, const void* vb, int n, int hd, int d0,
                         float* const* acc) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  F a[kQ][kC];
#pragma GCC unroll 4
  for (int q = 0; q < kQ; ++q) {
#pragma GCC unroll 4
    for (int c = 0; c < kC; ++c) a[q][c] = V::Load(acc[q] + d0 + c * L);
  }
  for (int j = 0; j < n; ++j) {
    if constexpr (kT == KvDtype::kQ8_0) {  // L divides a q8_0 block's 32 values
#pragma GCC unroll 4
      for (int c = 0; c < kC; ++c) {
        const int d = d0 + c * L;
        const F x = V::LoadI8(static_cast<const int8_t*>(vb) + static_cast<size_t>(j) * hd + d);
        const int w = d / kKvQ8_0BlockValues * kOneStepWeightKeys + j;
#pragma GCC unroll 4
        for (int q = 0; q < kQ; ++q) a[q][c] = V::Fma(V::Set1(weights[q][w]), x, a[q][c]);
      }
    } else {
      F pj[kQ];
#pragma GCC unroll 4
      for (int q = 0; q < kQ; ++q) pj[q] = V::Set1(p[q][j]);
#pragma GCC unroll 4
      for (int c = 0; c < kC; ++c) {
        const F x = LoadKvLanes<V, kT>(vb, j, d0 + c * L, hd);
#pragma GCC unroll 4
        for (int q = 0; q < kQ; ++q) a[q][c] = V::Fma(pj[q], x, a[q][c]);
      }
    }
  }
#pragma GCC unroll 4
  for (int q = 0; q < kQ; ++q) {
#pragma GCC unroll 4
    for (int c = 0; c < kC; ++c) V::Store(acc[q] + d0 + c * L, a[q][c]);
  }
}

// Queries the fallback rounds and scores together against a q8_0 cache
// (ScoresQ8_0 reads each key once for them; a key's score does not depend
// on the batch).
inline constexpr int kOneStepQ8_0Queries = 8;

// Calls fn(std::integral_constant<int, kC>{}, d0) over the whole vectors of
// a row of hd values, kC = 4 vectors at a time, then the 1 to 3 left;
// returns where they end (hd rounded down to a multiple of L).
template <int L, class Fn>
int ForVectorGroups(int hd, Fn&& fn) {
  int d = 0;
  for (; d + 4 * L <= hd; d += 4 * L) fn(std::integral_constant<int, 4>{}, d);
  switch ((hd - d) / L) {
    case 3: fn(std::integral_constant<int, 3>{}, d); break;
    case 2: fn(std::integral_constant<int, 2>{}, d); break;
    case 1: fn(std::integral_constant<int, 1>{}, d); break;
    default: break;
  }
  return hd / L * L;
}

// Queries whose values the fallback takes through a block together
// (OneStepValueVectors: 2 x 4 accumulators, 4 values and 2 weights fit
// AVX2's 16 registers).
inline constexpr int kOneStepValueQueries = 2;

// For each of kQ queries q: acc[q][0, hd) += the values of keys [0, n) of
// the block at vb (block_keys slots), key by key in order (weights:
// scratch for kQ * kOneStepWeightKeys * hd / 32 q8_0 weights).
template <class V, KvDtype kT, int kQ>
void OneStepValues(const float* const* p, const void* vb, int block_keys, int n, int hd, float* weights,
                   float* const* acc) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  if constexpr (kT == KvDtype::kQ8_0) {  // rows of weights, then the quants of those keys
    const size_t weight_floats = static_cast<size_t>(kOneStepWeightKeys) * (hd / kKvQ8_0BlockValues);
    float* query_weights[kQ];
    for (int q = 0; q < kQ; ++q) query_weights[q] = weights + q * weight_floats;
    for (int j0 = 0; j0 < n; j0 += kOneStepWeightKeys) {
      const int count = n - j0 < kOneStepWeightKeys ? n - j0 : kOneStepWeightKeys;
      const int8_t* quants = Q8_0ValueQuants(vb, hd, block_keys, j0);
      const float* chunk_p[kQ];
      for (int q = 0; q < kQ; ++q) chunk_p[q] = p[q] + j0;
      RowWeightsQ8_0<V, kQ>(chunk_p, vb, block_keys, j0, count, hd, query_weights);
      ForVectorGroups<L>(hd, [&](auto c, int d) {
        OneStepValueVectors<V, kT, decltype(c)::value, kQ>(nullptr, query_weights, quants, count, hd, d, acc);
      });
    }
  } else {
    const int d = ForVectorGroups<L>(hd, [&](auto c, int d0) {
      OneStepValueVectors<V, kT, decltype(c)::value, kQ>(p, nullptr, vb, n, hd, d0, acc);
    });
    if (d < hd) {  // the last values, less than a vector
      const int width = hd - d;
      for (int q = 0; q < kQ; ++q) {
        F a = V::LoadPartial(acc[q] + d, width);
        for (int j = 0; j < n; ++j) a = V::Fma(V::Set1(p[q][j]), LoadKvPartial<V, kT>(vb, j, d, hd, width), a);
        V::StorePartial(acc[q] + d, a, width);
      }
    }
  }
}

// The fallback for heads without a fixed kernel (any head_dim; a multiple
// of 32 for a q8_0 cache): each query's whole visible context in one
// online-softmax step, as AttentionBlocksFixed (the scores of every block,
// one rescale, then the values block by block, read in place, 4 vectors at
// a time). So a result does not depend on how the keys are paged, as
// AttentionUpdateBlocks states; block by block steps would rescale (and
// for a q8_0 cache round each BF16 weight) against each block's running
// max (docs/performance/kv-types.md, "Q8_0 caches on heads without a fixed
// kernel"). Up to kAttentionTileQueries queries go through each block
// together, so it is read from memory once for the group, not once per
// query; each query still takes its keys in order, so its bits are those
// of a query alone. Against a q8_0 cache the group's queries are rounded
// once and scored kOneStepQ8_0Queries at a time by ScoresQ8_0 over all
// their keys (the same bits as one query and one block at a time). Two
// queries that see the same keys of a block take its values together
// (kOneStepValueQueries), each value converted once for both.
// scratch: kAttentionTileQueries rows of the group's most visible keys,
// then (q8_0) 2 * kOneStepWeightKeys * head_dim / 32 weights (within
// AttentionBlocksScratchFloats: AttentionTileScratchFloats' part floats
// hold them).
template <class V, KvDtype kT>
void AttentionBlocksOneStep(const float* q, int64_t q_row_stride, int rows, int heads, const void* const* k,
                            const void* const* v, int n_blocks, int block_keys, int head_dim, const int* visible,
                            float scale, float* max, float* sum, float* acc, float* scratch) {
  static_assert(kOneStepValueQueries * kOneStepWeightKeys * kKvQ8_0MaxHeadDim / kKvQ8_0BlockValues <=
                kAttentionTilePartFloats);
  const int total = n_blocks * block_keys, queries = rows * heads;
  auto visible_keys = [&](int i) { return visible[i / heads] < total ? visible[i / heads] : total; };
  for (int i0 = 0; i0 < queries; i0 += kAttentionTileQueries) {
    const int i1 = queries - i0 < kAttentionTileQueries ? queries : i0 + kAttentionTileQueries;
    int stride = 0;
    for (int i = i0; i < i1; ++i) stride = visible_keys(i) > stride ? visible_keys(i) : stride;
    if (stride <= 0) continue;
    float* weights = scratch + static_cast<size_t>(kAttentionTileQueries) * stride;
    auto query_scores = [&](int i) { return scratch + static_cast<size_t>(i - i0) * stride; };
    const int used_blocks = (stride + block_keys - 1) / block_keys;
    if constexpr (kT == KvDtype::kQ8_0) {  // a few queries rounded once, scored together over all their keys
      alignas(64) uint8_t rounded[kOneStepQ8_0Queries * QueryQ8_0Bytes(kKvQ8_0MaxHeadDim)];
      const size_t query_bytes = QueryQ8_0Bytes(head_dim);
      for (int j0 = i0; j0 < i1; j0 += kOneStepQ8_0Queries) {
        const int j1 = i1 - j0 < kOneStepQ8_0Queries ? i1 : j0 + kOneStepQ8_0Queries;
        int n = 0;  // the most keys one of them sees (the others' extra scores are never read)
        for (int i = j0; i < j1; ++i) {
          QuantizeQueryQ8_0(q + (i / heads) * q_row_stride + (i % heads) * head_dim, head_dim, scale,
                            rounded + (i - j0) * query_bytes);
          n = visible_keys(i) > n ? visible_keys(i) : n;
        }
        if (n > 0) ScoresQ8_0(rounded, j1 - j0, head_dim, k, block_keys, n, query_scores(j0), stride);
      }
    } else {
      for (int b = 0; b < used_blocks; ++b) {  // the group's scores, block by block
        for (int i = i0; i < i1; ++i) {
          const int nb = visible_keys(i) - b * block_keys < block_keys ? visible_keys(i) - b * block_keys : block_keys;
          if (nb <= 0) continue;
          const float* qi = q + (i / heads) * q_row_stride + (i % heads) * head_dim;
          BlockScores<V, kT>(qi, k[b], nb, head_dim, scale, query_scores(i) + b * block_keys);
        }
      }
    }
    for (int i = i0; i < i1; ++i) {
      if (visible_keys(i) <= 0) continue;
      ScaleRow<V>(acc + static_cast<size_t>(i) * head_dim, head_dim,
                  SoftmaxStep<V>(query_scores(i), visible_keys(i), max[i], sum[i]));
    }
    auto block_keys_of = [&](int i, int b) {
      return visible_keys(i) - b * block_keys < block_keys ? visible_keys(i) - b * block_keys : block_keys;
    };
    for (int b = 0; b < used_blocks; ++b) {  // then its values, block by block, two queries at a time
      for (int i = i0; i < i1;) {
        const int nb = block_keys_of(i, b);
        if (nb <= 0) {
          ++i;
          continue;
        }
        if (i + 1 < i1 && block_keys_of(i + 1, b) == nb) {  // (a GQA group's heads; a prompt's rows)
          const float* p[2] = {query_scores(i) + b * block_keys, query_scores(i + 1) + b * block_keys};
          float* accs[2] = {acc + static_cast<size_t>(i) * head_dim, acc + static_cast<size_t>(i + 1) * head_dim};
          OneStepValues<V, kT, kOneStepValueQueries>(p, v[b], block_keys, nb, head_dim, weights, accs);
          i += 2;
        } else {
          const float* p[1] = {query_scores(i) + b * block_keys};
          float* accs[1] = {acc + static_cast<size_t>(i) * head_dim};
          OneStepValues<V, kT, 1>(p, v[b], block_keys, nb, head_dim, weights, accs);
          ++i;
        }
      }
    }
  }
}

// AttentionUpdateBlocks for head_dim = 1, 2, 4, 8 or 16 vectors
// (register-resident accumulators); other sizes take
// AttentionBlocksOneStep.
template <class V>
void AttentionBlocksWith(KvDtype dtype, const float* q, int64_t q_row_stride, int rows, int heads,
                         const void* const* k, const void* const* v, int n_blocks, int block_keys,
                         int head_dim, const int* visible, float scale, float* max, float* sum,
                         float* acc, float* scratch) {
  constexpr int L = V::kLanes;
#define KVS_ATTENTION_FIXED(CHUNKS)                                                             \
  if (head_dim == (CHUNKS) * L) {                                                               \
    return WithKvDtype(dtype, [&](auto t) {                                                     \
      AttentionBlocksFixed<V, decltype(t)::value, CHUNKS>(q, q_row_stride, rows, heads, k, v,   \
                                                          n_blocks, block_keys, visible, scale, \
                                                          max, sum, acc, scratch);              \
    });                                                                                         \
  }
  KVS_ATTENTION_FIXED(1)
  KVS_ATTENTION_FIXED(2)
  KVS_ATTENTION_FIXED(4)
  KVS_ATTENTION_FIXED(8)
  KVS_ATTENTION_FIXED(16)
#undef KVS_ATTENTION_FIXED
  WithKvDtype(dtype, [&](auto t) {
    AttentionBlocksOneStep<V, decltype(t)::value>(q, q_row_stride, rows, heads, k, v, n_blocks, block_keys,
                                                  head_dim, visible, scale, max, sum, acc, scratch);
  });
}

// The table entries every instruction set fills the same way.
template <class V>
void FillAttentionEntries(kernel_table::KernelTable* t) {
  t->attention_blocks = AttentionBlocksWith<V>;
  t->store_f16 = ConvertToF16<V>;
  t->load_f16 = ConvertF16<V>;
}

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_SIMD_ATTENTION_H_
