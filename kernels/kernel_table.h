// Internal to kernels/: the table of kernel entry points for one
// instruction-set level, and the plain views the entry points take.
//
// The public functions (MatmulRows, MatmulRowsQuantized, MatmulPackedQ8_0,
// DequantizeRow, AttentionUpdate, StoreKv/LoadKv) look up
// ActiveKernelTable() and call through it; this table is the only kernel
// dispatch. Each level's table starts as a copy of the scalar one and the
// SIMD files overwrite the entries they implement, so a level never lacks an
// entry. The tables are built once, on first use (thread-safe static
// initialisation), and are immutable after: whether the AVX-512 level uses
// AMX is decided then (AmxAvailable() in packed_q8_0.h, KVS_AMX=0 turns it
// off) and recorded in the table's `amx` and `name`. Everything here is plain data and function pointers: SIMD
// translation units include this header (see the ODR rule in
// cpu_features.h), so it must not define any function.
#ifndef KVSESSION_KERNELS_KERNEL_TABLE_H_
#define KVSESSION_KERNELS_KERNEL_TABLE_H_

#include <cstddef>
#include <cstdint>

#include "kernels/attention_run.h"
#include "kernels/cpu_features.h"
#include "kernels/kv_dtype.h"
#include "kernels/top_logits.h"

namespace kvs {

enum class GgmlType : uint32_t;

namespace kernel_table {

// Dense index of the weight types the kernels compute with.
enum ComputeType : int {
  kF32 = 0,
  kF16,
  kBF16,
  kQ8_0,
  kQ4_0,
  kQ4_K,
  kQ6_K,
  kNumComputeTypes
};

// The ComputeType of `type`, or -1 when the kernels cannot compute with it.
int ComputeTypeOf(GgmlType type);

// Weight rows [0, rows) of `cols` values, row r at data + r * row_bytes.
struct WeightRows {
  const uint8_t* data;
  size_t row_bytes;
  int64_t cols;
};

// Activation rows as QuantizeActivations wrote them (layout in
// matmul_quantized.cc): row j starts at data + j * row_bytes with its
// values; its per-block scales (float) start `scales_offset` bytes into the
// row and its 16-value block sums (int16, K-quant weights only)
// `sums_offset` bytes into the row.
struct QuantizedRows {
  const uint8_t* data;
  size_t row_bytes;
  size_t scales_offset;
  size_t sums_offset;
};

// Weight rows the exact path dequantizes into scratch at a time when it
// reuses them across many activation rows.
constexpr int kMatmulScratchRows = 4;

// y[j * y_stride + r] = W[r] . x[j] for r in [r0, r1), j in [0, nx).
// `scratch` holds kMatmulScratchRows * cols floats.
using MatmulFn = void (*)(const WeightRows& w, int64_t r0, int64_t r1, const float* x, int nx,
                          int64_t x_stride, float* y, int64_t y_stride, float* scratch);
using MatmulQuantizedFn = void (*)(const WeightRows& w, int64_t r0, int64_t r1,
                                   const QuantizedRows& x, int nx, float* y, int64_t y_stride);
using DequantizeFn = void (*)(const uint8_t* row, float* out, int64_t n);
// Rounds `cols` activations to int8 blocks of `block` (32 or 256): scale
// max|x| / 127 (F16-rounded when `f16_scale`), quants nearest-even of
// x / scale, and the sums of every 16 quants when `sums` is not null. Every
// level gives the scalar bits.
using QuantizeInt8Fn = void (*)(const float* x, int64_t cols, int block, bool f16_scale, int8_t* q,
                                float* d, int16_t* sums);
using AttentionBlocksFn = void (*)(KvDtype dtype, const float* q, int64_t q_row_stride, int rows,
                                   int heads, const void* const* k_blocks,
                                   const void* const* v_blocks, int n_blocks, int block_keys,
                                   int head_dim, const int* visible, float scale, float* max,
                                   float* sum, float* acc, float* scratch);
// Several runs of rows, each over its own blocks (attention.h
// AttentionUpdateRuns).
using AttentionRunsFn = void (*)(KvDtype dtype, const float* q, int64_t q_row_stride,
                                 const AttentionRun* runs, int n_runs, int heads, int block_keys,
                                 int head_dim, const int* visible, float scale, float* max,
                                 float* sum, float* acc, float* scratch);
// An AttentionRunsFn made of one `blocks` call per run (no blocks shared).
void AttentionRunsOneByOne(AttentionBlocksFn blocks, KvDtype dtype, const float* q, int64_t q_row_stride,
                           const AttentionRun* runs, int n_runs, int heads, int block_keys, int head_dim,
                           const int* visible, float scale, float* max, float* sum, float* acc,
                           float* scratch);
// One row's queries of several KV heads (attention.h
// AttentionUpdateHeads).
using AttentionHeadsFn = void (*)(KvDtype dtype, const float* q, int heads, int kv_heads,
                                  const void* const* k_blocks, const void* const* v_blocks, int n_blocks,
                                  int block_keys, int head_dim, int visible, float scale, float* max, float* sum,
                                  float* acc, float* scratch);
// An AttentionHeadsFn made of one `blocks` call per KV head.
void AttentionHeadsOneByOne(AttentionBlocksFn blocks, KvDtype dtype, const float* q, int heads, int kv_heads,
                            const void* const* k_blocks, const void* const* v_blocks, int n_blocks, int block_keys,
                            int head_dim, int visible, float scale, float* max, float* sum, float* acc,
                            float* scratch);
// Packed Q8_0 weights (packed_q8_0.h, which states the arguments, among
// them `ask_end` and `asked`, and the arithmetic every such kernel shares
// bit for bit).
using PackedQ8_0MatmulFn = void (*)(const uint8_t* packed, int64_t rows, int64_t cols, int64_t r0,
                                    int64_t r1, const uint8_t* xq, size_t x_row_bytes,
                                    size_t scales_offset, int nx, float* y, int64_t y_stride,
                                    int64_t ask_end, bool asked);
// The fewest weight rows worth one call of a packed Q8_0 kernel with `nx`
// activation rows (packed_q8_0.h PackedQ8_0MinCallRows).
using PackedQ8_0MinCallRowsFn = int64_t (*)(int nx);
// Packs up to 16 Q8_0 rows into one packed group (packed_q8_0.h
// PackQ8_0Group; every level gives the same bytes).
using PackQ8_0GroupFn = void (*)(const uint8_t* const* rows, int n_rows, int64_t cols, uint8_t* out,
                                 const uint8_t* ahead, size_t ahead_bytes);
// Scores of one key group of a q8_0 cache (q8_0_kv_blocks.h: 16 slots,
// F16 scales [nb][16] then quants [nb][8][16][4] as q + 128, unpadded)
// against nq <= kScoresQ8_0GroupMaxQueries rounded queries: the bits of the
// level's packed kernel on that group (attention_q8_0_scores.h states the
// arithmetic and the arguments). nullptr where the level has none (the
// group is then multiplied by the packed kernel).
inline constexpr int kScoresQ8_0GroupMaxQueries = 4;
using ScoresQ8_0GroupFn = void (*)(const uint8_t* group, int n_rows, int64_t head_dim, const uint8_t* queries,
                                   size_t query_bytes, size_t scales_offset, int nq, float* scores, int64_t stride,
                                   const uint8_t* ahead, size_t ahead_bytes);
// The best logits (top_logits.h Argmax, TopK and LogitsAbove).
using ArgmaxFn = int64_t (*)(const float* x, int64_t n);
using TopKFn = int (*)(const float* x, int64_t n, int k, TopLogit* out);
using LogitsAboveFn = int (*)(const float* x, int64_t n, float floor, int max_out, TopLogit* out);
// The softmax denominator of the sampler (softmax_denominator.h; every
// level gives the same bits).
using SoftmaxDenominatorFn = double (*)(const float* x, int64_t n, float max);
using FloatToHalfFn = void (*)(const float* src, uint16_t* dst, int64_t n);
// SwiGLU of the feed-forward block (activation.h SiluMul).
using SiluMulFn = void (*)(float* gate, const float* up, int64_t n);
using HalfToFloatFn = void (*)(const uint16_t* src, float* dst, int64_t n);
// RMS normalisation (norm.h RmsNorm): every level the scalar bits.
using RmsNormFn = void (*)(const float* x, const float* weight, float eps, int64_t n, float* out);
// x[i] += y[i] (activation.h AddInPlace).
using AddInPlaceFn = void (*)(float* x, const float* y, int64_t n);

struct KernelTable {
  // What ActiveKernelsName() reports: the level's name ("scalar", "avx2",
  // "avx512"), with "+amx" appended when `amx`, then "+bf16" when the
  // table uses AVX512-BF16 (avx512+bf16, avx512+amx+bf16).
  const char* name;
  MatmulFn matmul[kNumComputeTypes];
  MatmulQuantizedFn matmul_quantized[kNumComputeTypes];
  QuantizeInt8Fn quantize_int8;
  DequantizeFn dequantize[kNumComputeTypes];
  // Many queries per call (prefill) take the tiled kernel; the per-query
  // kernel gives the same bits (attention.h UseTiledAttention).
  AttentionBlocksFn attention_blocks;
  AttentionBlocksFn attention_blocks_per_query;
  // Runs whose leading blocks are the same pages (forks of one prompt)
  // share one tile over those blocks; the same bits as a call per run.
  AttentionRunsFn attention_runs;
  // A decode row's KV heads in turn over spans of pages; the same bits as
  // a call per head.
  AttentionHeadsFn attention_heads;
  FloatToHalfFn store_f16;  // F32 -> F16, round to nearest even
  HalfToFloatFn load_f16;   // F16 -> F32, exact
  // Packed Q8_0: whether models pack their Q8_0 weights at this level
  // (PackedQ8_0Supported), the kernel for batches of fewer than kAmxMinRows
  // activation rows, and the one for kAmxMinRows rows or more (AMX when
  // `amx`, else the same as `packed_q8_0`).
  bool pack_q8_0;
  PackedQ8_0MatmulFn packed_q8_0;
  PackedQ8_0MatmulFn packed_q8_0_wide;
  PackedQ8_0MinCallRowsFn packed_q8_0_min_call_rows;  // for packed_q8_0
  PackQ8_0GroupFn pack_q8_0_group;
  // A decode row's few queries against Q8_0 keys without packing them
  // (AVX2 and AVX-512: a few queries' products cost less than the packed
  // layout's stores, reloads and scale copies); nullptr: pack.
  ScoresQ8_0GroupFn scores_q8_0_group;
  bool amx;
  // Whether the vector attention kernels fold Q8_0 values in int16 groups
  // (attention_q8_0_values.h; the heads attention.h
  // Q8_0ValuesInInt16Groups names), else with BF16 weights.
  bool q8_0_value_groups;
  // Whether the attention entries are the AMX kernels (attention_amx.h),
  // which take F16, BF16 and Q8_0 caches with heads of a multiple of 32.
  bool amx_attention;
  ArgmaxFn argmax;
  TopKFn top_k;
  LogitsAboveFn logits_above;
  SoftmaxDenominatorFn softmax_denominator;
  SiluMulFn silu_mul;
  AddInPlaceFn add_in_place;
  RmsNormFn rms_norm;
};

// The table of the active level (ActiveKernelIsa()).
const KernelTable& ActiveKernelTable();

// The table of `isa`, which the CPU must support.
const KernelTable& KernelTableFor(KernelIsa isa);

// The scalar DequantizeRow of ComputeType `type` (the reference every
// SIMD dequantization matches bit for bit).
void DequantizeRowScalar(int type, const uint8_t* row, float* out, int64_t n);

// Each file sets the entries it implements.
void FillScalarMatmul(KernelTable* t);           // matmul.cc
void FillScalarMatmulQuantized(KernelTable* t);  // matmul_quantized.cc
void FillScalarDequantize(KernelTable* t);       // dequantize.cc
void FillScalarAttention(KernelTable* t);        // attention.cc
void FillScalarPackedQ8_0(KernelTable* t);       // packed_q8_0.cc
void FillScalarTopLogits(KernelTable* t);        // top_logits.cc
void FillScalarSoftmaxDenominator(KernelTable* t);  // softmax_denominator.cc
void FillScalarActivation(KernelTable* t);       // activation.cc
void FillScalarNorm(KernelTable* t);             // norm.cc
void FillAvx2Matmul(KernelTable* t);             // matmul_avx2.cc
void FillAvx2MatmulQuantized(KernelTable* t);    // matmul_quantized_avx2.cc
void FillAvx2Attention(KernelTable* t);          // attention_avx2.cc
void FillAvx2PackedQ8_0(KernelTable* t);         // packed_q8_0_avx2.cc
void FillAvx2TopLogits(KernelTable* t);          // top_logits_avx2.cc
void FillAvx2SoftmaxDenominator(KernelTable* t);  // softmax_denominator_avx2.cc
void FillAvx2Activation(KernelTable* t);         // activation_avx2.cc
void FillAvx2Norm(KernelTable* t);               // norm_avx2.cc
void FillAvx512Matmul(KernelTable* t);           // matmul_avx512.cc
void FillAvx512MatmulQuantized(KernelTable* t);  // matmul_quantized_avx512.cc
void FillAvx512Bf16Matmul(KernelTable* t);       // matmul_avx512_bf16.cc (needs AVX512-BF16)
void FillAvx512Attention(KernelTable* t);        // attention_avx512.cc
void FillAvx512PackedQ8_0(KernelTable* t);       // packed_q8_0_avx512.cc
void FillAvx512TopLogits(KernelTable* t);        // top_logits_avx512.cc
void FillAvx512SoftmaxDenominator(KernelTable* t);  // softmax_denominator_avx512.cc
void FillAvx512Activation(KernelTable* t);       // activation_avx512.cc
void FillAvx512Norm(KernelTable* t);             // norm_avx512.cc
void FillAmxPackedQ8_0(KernelTable* t);          // packed_q8_0_amx.cc (needs AmxAvailable())
void FillAmxAttention(KernelTable* t);           // attention_amx.cc (needs AmxBf16Available())

}  // namespace kernel_table
}  // namespace kvs

#endif  // KVSESSION_KERNELS_KERNEL_TABLE_H_
