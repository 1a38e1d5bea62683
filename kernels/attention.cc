#include "kernels/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "kernels/amx_tiles.h"
#include "kernels/attention_amx.h"
#include "kernels/attention_q8_0_scores.h"
#include "kernels/attention_q8_0_values.h"
#include "kernels/attention_tile.h"
#include "kernels/cpu_features.h"
#include "kernels/dequantize.h"
#include "kernels/fp16.h"
#include "kernels/kernel_table.h"
#include "kernels/q8_0_kv_blocks.h"
#include "kernels/matmul.h"
#include "kernels/quantize.h"

namespace kvs {

namespace {

// Values StoreKv quantizes to q8_0 per kernel call (a multiple of 32).
constexpr int64_t kQ8_0Chunk = 256;

void StoreQ8_0(const float* src, uint8_t* dst, int64_t n) {
  int8_t quants[kQ8_0Chunk];
  float scales[kQ8_0Chunk / kKvQ8_0BlockValues];
  for (int64_t i0 = 0; i0 < n; i0 += kQ8_0Chunk) {
    const int64_t count = std::min(kQ8_0Chunk, n - i0);
    kernel_table::ActiveKernelTable().quantize_int8(src + i0, count, kKvQ8_0BlockValues, true, quants, scales,
                                                    nullptr);
    for (int64_t b = 0; b < count / kKvQ8_0BlockValues; ++b, dst += kKvQ8_0BlockBytes) {
      const uint16_t scale = Fp32ToFp16(scales[b]);  // exact: the scale is F16-rounded
      std::memcpy(dst, &scale, sizeof scale);
      std::memcpy(dst + sizeof scale, quants + b * kKvQ8_0BlockValues, kKvQ8_0BlockValues);
    }
  }
}

}  // namespace

void StoreKv(KvDtype dtype, const float* src, void* dst, int64_t n) {
  switch (dtype) {
    case KvDtype::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case KvDtype::kF16:
      kernel_table::ActiveKernelTable().store_f16(src, static_cast<uint16_t*>(dst), n);
      return;
    case KvDtype::kBF16:
      QuantizeRow(GgmlType::kBF16, src, dst, n);
      return;
    case KvDtype::kQ8_0:
      StoreQ8_0(src, static_cast<uint8_t*>(dst), n);
      return;
  }
}

void LoadKv(KvDtype dtype, const void* src, float* dst, int64_t n) {
  switch (dtype) {
    case KvDtype::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case KvDtype::kF16:
      kernel_table::ActiveKernelTable().load_f16(static_cast<const uint16_t*>(src), dst, n);
      return;
    case KvDtype::kBF16:
      DequantizeRow(GgmlType::kBF16, src, dst, n);
      return;
    case KvDtype::kQ8_0:
      DequantizeRow(GgmlType::kQ8_0, src, dst, n);
      return;
  }
}

size_t AttentionScratchFloats(int block_keys, int head_dim) {
  return std::max(static_cast<size_t>(block_keys) * (2 * head_dim + 1),
                  AttentionTileScratchFloats(block_keys));
}

namespace {

bool TiledFromEnvironment() {
  const char* env = std::getenv("KVS_ATTENTION");
  return env == nullptr || std::strcmp(env, "per-query") != 0;
}

std::atomic<bool>& TiledAttention() {
  static std::atomic<bool> tiled{TiledFromEnvironment()};
  return tiled;
}

}  // namespace

void UseTiledAttention(bool tiled) { TiledAttention().store(tiled, std::memory_order_relaxed); }

bool TiledAttentionInUse() { return TiledAttention().load(std::memory_order_relaxed); }

bool AmxAttentionAvailable() { return AmxBf16Available(); }

namespace {

std::atomic<bool>& AmxAttentionSlot() {
  static std::atomic<bool> on{[] {
    const char* env = std::getenv("KVS_AMX_ATTENTION");
    return env != nullptr && std::strcmp(env, "1") == 0 && AmxAttentionAvailable();
  }()};
  return on;
}

}  // namespace

bool UseAmxAttention(bool on) {
  if (on && !AmxAttentionAvailable()) return false;
  AmxAttentionSlot().store(on, std::memory_order_relaxed);
  return true;
}

bool AmxAttentionInUse() { return AmxAttentionSlot().load(std::memory_order_relaxed); }

bool AttentionUsesAmx(KvDtype dtype, int head_dim) {
  return AmxAttentionInUse() && kernel_table::ActiveKernelTable().amx_attention && AmxAttentionTakes(dtype, head_dim);
}

bool Q8_0ValuesInInt16Groups(int head_dim) {
  const bool fixed_head = head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
  return kernel_table::ActiveKernelTable().q8_0_value_groups && fixed_head &&
         !AttentionUsesAmx(KvDtype::kQ8_0, head_dim);
}

void AttentionInit(int nq, int head_dim, float* max, float* sum, float* acc) {
  for (int i = 0; i < nq; ++i) {
    max[i] = -std::numeric_limits<float>::infinity();
    sum[i] = 0;
  }
  std::memset(acc, 0, sizeof(float) * nq * head_dim);
}

namespace {

void StoreF16Scalar(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp32ToFp16(src[i]);
}

void LoadF16Scalar(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(src[i]);
}

// A query rounded to Q8_0 as attention_q8_0_scores.h states it (F32
// scales times the attention scale), and its score against a Q8_0 key row: exact integer block sums,
// one fma per block.
struct QueryQ8_0 {
  int8_t quants[kQ8_0ScoresMaxHeadDim];
  float scales[kQ8_0ScoresMaxHeadDim / kKvQ8_0BlockValues];

  QueryQ8_0(const float* q, int head_dim, float scale) {
    kernel_table::KernelTableFor(KernelIsa::kScalar).quantize_int8(q, head_dim, kKvQ8_0BlockValues, false, quants,
                                                                   scales, nullptr);
    for (int b = 0; b < head_dim / kKvQ8_0BlockValues; ++b) scales[b] *= scale;
  }

  float Dot(const uint8_t* key, int head_dim) const {
    float y = 0;
    for (int b = 0; b < head_dim / kKvQ8_0BlockValues; ++b) {
      const uint8_t* block = key + static_cast<size_t>(b) * kKvQ8_0BlockBytes;
      uint16_t h;
      std::memcpy(&h, block, 2);
      int32_t isum = 0;
      for (int d = 0; d < kKvQ8_0BlockValues; ++d) {
        isum += static_cast<int8_t>(block[2 + d]) * quants[b * kKvQ8_0BlockValues + d];
      }
      y = std::fma(static_cast<float>(isum), Fp16ToFp32(h) * scales[b], y);
    }
    return y;
  }
};

// The scalar reference of AttentionUpdateBlocks.
void AttentionBlocksScalar(KvDtype dtype, const float* q, int64_t q_row_stride, int rows, int heads,
                           const void* const* k_blocks, const void* const* v_blocks, int n_blocks,
                           int block_keys, int head_dim, const int* visible, float scale,
                           float* max, float* sum, float* acc, float* scratch) {
  const size_t row_bytes = KvBytes(dtype, head_dim);
  auto at = [&](const void* const* blocks, int key, int d) {
    const uint8_t* row =
        static_cast<const uint8_t*>(blocks[key / block_keys]) + static_cast<size_t>(key % block_keys) * row_bytes;
    float f;
    uint16_t h;
    switch (dtype) {
      case KvDtype::kF32:
        std::memcpy(&f, row + 4 * d, 4);
        return f;
      case KvDtype::kF16:
        std::memcpy(&h, row + 2 * d, 2);
        return Fp16ToFp32(h);
      case KvDtype::kBF16:
        std::memcpy(&h, row + 2 * d, 2);
        return Bf16ToFp32(h);
      case KvDtype::kQ8_0:  // not rows: the slot functions below read its blocks
        break;
    }
    return 0.0f;
  };
  float* scores = scratch;
  uint8_t key[kKvQ8_0MaxHeadDim / kKvQ8_0BlockValues * kKvQ8_0BlockBytes];  // one q8_0 slot as a Q8_0 row
  uint8_t value[sizeof key];
  for (int r = 0; r < rows; ++r) {
    const int n = std::min(visible[r], n_blocks * block_keys);
    if (n <= 0) continue;
    for (int h = 0; h < heads; ++h) {
      const int i = r * heads + h;
      const float* qi = q + r * q_row_stride + h * head_dim;
      float block_max = -std::numeric_limits<float>::infinity();
      if (dtype == KvDtype::kQ8_0) {
        const QueryQ8_0 rounded(qi, head_dim, scale);
        for (int j = 0; j < n; ++j) {
          LoadQ8_0KeySlot(static_cast<const uint8_t*>(k_blocks[j / block_keys]), head_dim, j % block_keys, key);
          scores[j] = rounded.Dot(key, head_dim);
        }
      } else {
        for (int j = 0; j < n; ++j) {
          float dot = 0;
          for (int d = 0; d < head_dim; ++d) dot += qi[d] * at(k_blocks, j, d);
          scores[j] = scale * dot;
        }
      }
      for (int j = 0; j < n; ++j) block_max = std::max(block_max, scores[j]);
      const float new_max = std::max(block_max, max[i]);
      const float correction = std::exp(max[i] - new_max);
      float* acc_i = acc + static_cast<size_t>(i) * head_dim;
      float block_sum = 0;
      for (int d = 0; d < head_dim; ++d) acc_i[d] *= correction;
      for (int j = 0; j < n; ++j) {
        const float p = std::exp(scores[j] - new_max);
        block_sum += p;
        if (dtype == KvDtype::kQ8_0) {  // attention_q8_0_values.h
          LoadQ8_0ValueSlot(static_cast<const uint8_t*>(v_blocks[j / block_keys]), head_dim, block_keys,
                            j % block_keys, value);
          const uint8_t* row = value;
          for (int b = 0; b < head_dim / kKvQ8_0BlockValues; ++b) {
            const uint8_t* block = row + static_cast<size_t>(b) * kKvQ8_0BlockBytes;
            uint16_t h;
            std::memcpy(&h, block, 2);
            const float w = Q8_0ValueWeight(p, Fp16ToFp32(h));
            for (int d = 0; d < kKvQ8_0BlockValues; ++d) {
              acc_i[b * kKvQ8_0BlockValues + d] += w * static_cast<float>(static_cast<int8_t>(block[2 + d]));
            }
          }
        } else {
          for (int d = 0; d < head_dim; ++d) acc_i[d] += p * at(v_blocks, j, d);
        }
      }
      sum[i] = sum[i] * correction + block_sum;
      max[i] = new_max;
    }
  }
}

void AttentionRunsScalar(KvDtype dtype, const float* q, int64_t q_row_stride, const AttentionRun* runs,
                         int n_runs, int heads, int block_keys, int head_dim, const int* visible,
                         float scale, float* max, float* sum, float* acc, float* scratch) {
  kernel_table::AttentionRunsOneByOne(AttentionBlocksScalar, dtype, q, q_row_stride, runs, n_runs, heads,
                                      block_keys, head_dim, visible, scale, max, sum, acc, scratch);
}

void AttentionHeadsScalar(KvDtype dtype, const float* q, int heads, int kv_heads, const void* const* k_blocks,
                          const void* const* v_blocks, int n_blocks, int block_keys, int head_dim, int visible,
                          float scale, float* max, float* sum, float* acc, float* scratch) {
  kernel_table::AttentionHeadsOneByOne(AttentionBlocksScalar, dtype, q, heads, kv_heads, k_blocks, v_blocks,
                                       n_blocks, block_keys, head_dim, visible, scale, max, sum, acc, scratch);
}

}  // namespace

namespace kernel_table {

void AttentionRunsOneByOne(AttentionBlocksFn blocks, KvDtype dtype, const float* q, int64_t q_row_stride,
                           const AttentionRun* runs, int n_runs, int heads, int block_keys, int head_dim,
                           const int* visible, float scale, float* max, float* sum, float* acc,
                           float* scratch) {
  int row = 0;
  for (int i = 0; i < n_runs; ++i) {
    const size_t state = static_cast<size_t>(row) * heads;
    blocks(dtype, q + row * q_row_stride, q_row_stride, runs[i].rows, heads, runs[i].k_blocks,
           runs[i].v_blocks, runs[i].n_blocks, block_keys, head_dim, visible + row, scale, max + state,
           sum + state, acc + state * head_dim, scratch);
    row += runs[i].rows;
  }
}

void AttentionHeadsOneByOne(AttentionBlocksFn blocks, KvDtype dtype, const float* q, int heads, int kv_heads,
                            const void* const* k_blocks, const void* const* v_blocks, int n_blocks, int block_keys,
                            int head_dim, int visible, float scale, float* max, float* sum, float* acc,
                            float* scratch) {
  for (int h = 0; h < kv_heads; ++h) {
    const size_t state = static_cast<size_t>(h) * heads;
    blocks(dtype, q + state * head_dim, 0, 1, heads, k_blocks + static_cast<size_t>(h) * n_blocks,
           v_blocks + static_cast<size_t>(h) * n_blocks, n_blocks, block_keys, head_dim, &visible, scale,
           max + state, sum + state, acc + state * head_dim, scratch);
  }
}

void FillScalarAttention(KernelTable* t) {
  t->attention_blocks = AttentionBlocksScalar;
  t->attention_blocks_per_query = AttentionBlocksScalar;
  t->attention_runs = AttentionRunsScalar;
  t->attention_heads = AttentionHeadsScalar;
  t->store_f16 = StoreF16Scalar;
  t->load_f16 = LoadF16Scalar;
}

}  // namespace kernel_table

size_t AttentionBlocksScratchFloats(int max_keys, int block_keys, int head_dim, int heads) {
  return std::max({static_cast<size_t>(max_keys) * heads, AttentionScratchFloats(block_keys, head_dim),
                   AttentionTileScratchFloats(max_keys)});
}

void AttentionUpdateBlocks(KvDtype dtype, const float* q, int64_t q_row_stride, int rows, int heads,
                           const void* const* k_blocks, const void* const* v_blocks, int n_blocks,
                           int block_keys, int head_dim, const int* visible, float scale, float* max,
                           float* sum, float* acc, float* scratch) {
  const kernel_table::KernelTable& table = kernel_table::ActiveKernelTable();
  const kernel_table::AttentionBlocksFn kernel =
      TiledAttentionInUse() ? table.attention_blocks : table.attention_blocks_per_query;
  kernel(dtype, q, q_row_stride, rows, heads, k_blocks, v_blocks, n_blocks, block_keys,
         head_dim, visible, scale, max, sum, acc, scratch);
}

int AttentionSharedBlocks(const AttentionRun* runs, int n_runs, int block_keys, const int* visible) {
  if (n_runs < 2) return 0;
  // The fewest keys any row sees, and the fewest blocks any run has.
  int fewest_keys = std::numeric_limits<int>::max(), fewest_blocks = runs[0].n_blocks;
  int row = 0;
  for (int i = 0; i < n_runs; ++i) {
    fewest_blocks = std::min(fewest_blocks, runs[i].n_blocks);
    for (int r = 0; r < runs[i].rows; ++r, ++row) {
      fewest_keys = std::min(fewest_keys, std::min(visible[row], runs[i].n_blocks * block_keys));
    }
  }
  if (fewest_keys <= block_keys) return 0;
  // Whole blocks every row sees, with at least one key of its own after them.
  int shared = std::min(fewest_blocks, (fewest_keys - 1) / block_keys);
  for (int b = 0; b < shared; ++b) {
    for (int i = 1; i < n_runs; ++i) {
      if (runs[i].k_blocks[b] != runs[0].k_blocks[b] || runs[i].v_blocks[b] != runs[0].v_blocks[b]) return b;
    }
  }
  return shared;
}

void AttentionUpdateRuns(KvDtype dtype, const float* q, int64_t q_row_stride, const AttentionRun* runs,
                         int n_runs, int heads, int block_keys, int head_dim, const int* visible,
                         float scale, float* max, float* sum, float* acc, float* scratch) {
  if (TiledAttentionInUse()) {
    kernel_table::ActiveKernelTable().attention_runs(dtype, q, q_row_stride, runs, n_runs, heads, block_keys,
                                                     head_dim, visible, scale, max, sum, acc, scratch);
    return;
  }
  kernel_table::AttentionRunsOneByOne(kernel_table::ActiveKernelTable().attention_blocks_per_query, dtype, q,
                                      q_row_stride, runs, n_runs, heads, block_keys, head_dim, visible, scale, max,
                                      sum, acc, scratch);
}

void AttentionUpdateHeads(KvDtype dtype, const float* q, int heads, int kv_heads, const void* const* k_blocks,
                          const void* const* v_blocks, int n_blocks, int block_keys, int head_dim, int visible,
                          float scale, float* max, float* sum, float* acc, float* scratch) {
  const kernel_table::KernelTable& table = kernel_table::ActiveKernelTable();
  if (TiledAttentionInUse()) {
    table.attention_heads(dtype, q, heads, kv_heads, k_blocks, v_blocks, n_blocks, block_keys, head_dim, visible,
                          scale, max, sum, acc, scratch);
    return;
  }
  kernel_table::AttentionHeadsOneByOne(table.attention_blocks_per_query, dtype, q, heads, kv_heads, k_blocks,
                                       v_blocks, n_blocks, block_keys, head_dim, visible, scale, max, sum, acc,
                                       scratch);
}

void AttentionUpdate(KvDtype dtype, const float* q, int64_t q_row_stride, int rows, int heads,
                     const void* k, const void* v, int n_keys, int head_dim, const int* visible,
                     float scale, float* max, float* sum, float* acc, float* scratch) {
  // One block is the one-block case of AttentionUpdateBlocks.
  AttentionUpdateBlocks(dtype, q, q_row_stride, rows, heads, &k, &v, 1, n_keys, head_dim, visible,
                        scale, max, sum, acc, scratch);
}

void AttentionFinish(int rows, int heads, int head_dim, const float* sum, const float* acc,
                     float* out, int64_t out_row_stride) {
  for (int r = 0; r < rows; ++r) {
    for (int h = 0; h < heads; ++h) {
      const int i = r * heads + h;
      const float inv = sum[i] > 0 ? 1.0f / sum[i] : 0.0f;
      float* o = out + r * out_row_stride + h * head_dim;
      for (int d = 0; d < head_dim; ++d) o[d] = acc[static_cast<size_t>(i) * head_dim + d] * inv;
    }
  }
}

}  // namespace kvs
