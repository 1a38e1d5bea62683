// Transformer: the forward pass of a decoder-only model over a batch of
// sequences, reading and writing each sequence's KV pages.
//
// One Forward() call runs every layer once for all tokens of all items:
// prefill chunks (many tokens of one sequence) and decode steps (one token
// of each of many sequences) alike. Each weight matrix is read once per
// call, whatever the number of sequences; that is what makes N forks cost
// far less than N separate sessions.
//
// Per layer, for the batch's token rows (llama2.c names):
//   xb = rmsnorm(x) ; q,k,v = xb Wq,Wk,Wv (+bias) ; [qk-norm] ; rope(q,k)
//   write k,v into the pages at each row's position
//   att = softmax(q K^T / sqrt(hd)) V over the sequence's pages (causal)
//   x += att Wo ; xb = rmsnorm(x) ; x += (silu(xb Wg) * xb Wu) Wd
// then logits = rmsnorm(x) Wout for the rows that ask for them.
//
// Contract: the caller reserves each item's KV positions first
// (KvSequence::PrepareAppend(tokens.size()), which may allocate and
// copy-on-write pages, and may fail with RESOURCE_EXHAUSTED); Forward()
// only writes into them. Forward() validates the batch (token ids, context
// limit, batch size) and checks the reservation before changing anything;
// on error no sequence changes and no KV byte is written. On success each
// item's sequence grows by its token count (CommitAppend). All buffers are
// allocated at construction: a Forward performs no heap allocation.
//
// Ownership: borrows the config, weights and thread pool (they must outlive
// it). Not thread-safe: one Forward at a time (the engine's step loop).
#ifndef KVSESSION_MODEL_TRANSFORMER_H_
#define KVSESSION_MODEL_TRANSFORMER_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "cache/kv_sequence.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/thread_pool.h"

namespace kvs {

// Which logits an item wants.
enum class Logits : uint8_t {
  kLast,  // the last token's (decode, end of a prompt)
  kAll,   // every token's (teacher forcing, scoring)
  kNone,  // none (a prefill chunk in the middle of a prompt)
};

// One sequence's share of a batch: its tokens go at positions
// [kv->length(), kv->length() + tokens.size()).
struct ForwardItem {
  KvSequence* kv = nullptr;
  std::span<const int32_t> tokens;
  Logits logits = Logits::kLast;
  // RoPE turns the token at KV position p by angle (p + rope_offset) *
  // inv_freq; 0 everywhere in the service. Tests use it to compute keys at
  // shifted positions (model/key_rotation_test.cc).
  int rope_offset = 0;
};

// How matrix products treat activations (kernels/matmul.h):
//   kFast  rounded per weight type the way llama.cpp does (Q8_0 / Q8_K
//          blocks for quantized weights, F16 / BF16 for half weights) with
//          integer dot products: the default, matches llama.cpp's native
//          numerics;
//   kExact F32 activations against exactly widened weights: matches
//          llama.cpp on F32-widened weights (~1e-4).
enum class MatmulPath : uint8_t { kFast, kExact };

MatmulPath ParseMatmulPath(std::string_view name, bool* ok);
const char* MatmulPathName(MatmulPath path);

class Transformer {
 public:
  // `max_batch_tokens` bounds the token rows of one Forward; `max_context`
  // bounds any sequence's length (at most the model's training context).
  Transformer(const ModelConfig& config, const ModelWeights& weights, ThreadPool* pool,
              int max_batch_tokens, int max_context, MatmulPath path = MatmulPath::kFast);

  const ModelConfig& config() const { return config_; }
  MatmulPath matmul_path() const { return path_; }
  int max_batch_tokens() const { return max_batch_tokens_; }
  int max_context() const { return max_context_; }

  // The geometry a KV page pool needs for this model.
  KvGeometry kv_geometry(int page_tokens, KvDtype dtype) const;

  // Rows of logits Forward writes for `items`.
  static int OutputRows(std::span<const ForwardItem> items);

  // Runs the batch; `logits` receives OutputRows(items) rows of vocab_size
  // floats, in item order. Requires every item's positions
  // [kv->length(), kv->length() + tokens.size()) to be reserved by
  // kv->PrepareAppend(tokens.size()) since the sequence last changed.
  // Errors (nothing changes): InvalidArgument (bad token id, empty item, a
  // sequence twice, KV geometry not the model's or a KV type that does not
  // fit its head_dim (KvDtypeFitsHeadDim), batch larger than
  // max_batch_tokens), OutOfRange (a sequence would exceed max_context),
  // FailedPrecondition (an item's positions are not reserved: missing
  // pages, or a page to write that is shared or in the prefix cache).
  absl::Status Forward(std::span<const ForwardItem> items, float* logits);

 private:
  // A block of consecutive batch rows (queries) for one KV head, or a lone
  // row (AttentionLoneTask) for a share of its KV heads.
  struct AttentionTask {
    int row_begin;  // batch row of the first query
    int rows;       // 1 for a lone row
    int kv_head;    // the first KV head
    int kv_heads;   // 1 for a row block
    bool lone_row;
  };

  // One matrix product of a group that shares its input.
  struct MatmulJob {
    const WeightMatrix* w;
    float* y;
    int64_t y_stride;
  };
  static constexpr int kMaxGroup = 3;

  // The batch checks of Forward (InvalidArgument / OutOfRange as listed there).
  absl::Status Validate(std::span<const ForwardItem> items) const;
  // FailedPrecondition naming the first item whose positions are not
  // reserved (see Forward).
  static absl::Status CheckReserved(std::span<const ForwardItem> items);

  // Forward's phases, in order.
  // Lays the items' tokens out as batch rows (row_pos_, row_item_,
  // item_row_begin_); returns the row count.
  int LayOutRows(std::span<const ForwardItem> items);
  // x = token embeddings; rope_cs = rotary angles of each row's position;
  // xb = rmsnorm(x) with layer 0's attention norm (AttentionInput).
  void Embed(std::span<const ForwardItem> items, int n_rows);
  // Row r of layer `layer`'s attention input: xb = rmsnorm(x) with its
  // attention norm, quantized for wq (QuantizeInputRow).
  void AttentionInput(int layer, int r);
  // x += Attention(xb) Wo, the rows' K/V written to their pages, for the xb
  // that Embed or the layer before left (AttentionInput); leaves xb =
  // rmsnorm(x) with the FFN norm, quantized for w_gate (all three fused
  // with the residual add).
  void AttentionBlock(int layer, std::span<const ForwardItem> items, int n_rows);
  // One row of q/k/v after their matmuls: bias, QK-norm, RoPE, then k and v
  // stored in the row's KV slot.
  void FinishQkvRow(const LayerWeights& L, int layer, const ForwardItem& item, int r);
  // x += (silu(xb Wg) * xb Wu) Wd; then, unless `layer` is the last, the
  // next layer's AttentionInput (fused with the residual add).
  void FeedForwardBlock(int layer, int n_rows);
  // logits = rmsnorm(x) Wout for the rows that want logits (OutputRows).
  void FinalNormAndLogits(std::span<const ForwardItem> items, float* logits);

  // `quantized`: x's rows already quantized for w (QuantizedInput), or
  // null to quantize them here, as MatmulGroup.
  void Matmul(const WeightMatrix& w, const float* x, int nx, int64_t x_stride, float* y,
              int64_t y_stride, const uint8_t* quantized = nullptr);
  // Several products of the same input (Q/K/V, gate/up) in one pass of the
  // thread pool. On the fast path the input rows are quantized once per
  // distinct weight type before the products; `quantized`, when not null,
  // holds them for jobs[0].w already (QuantizedInput: the tasks that made
  // the rows quantized them, QuantizeInputRow), and the others of its type
  // share them.
  void MatmulGroup(std::span<const MatmulJob> jobs, const float* x, int nx, int64_t x_stride,
                   const uint8_t* quantized = nullptr);
  // Where QuantizeInputRow puts the next matmul's input rows for w: the
  // first region of xq_; null on the exact path and for F32 weights
  // (nothing to quantize).
  const uint8_t* QuantizedInput(const WeightMatrix& w);
  // Quantizes `row` as batch row r of the next matmul's input over w
  // (QuantizeActivations, into QuantizedInput(w)), in the task that just
  // made the row, while it is in that core's cache: the matmul then has
  // no quantize pass of its own (one thread, the other waiting, for a
  // decode or fan-out step's few rows). The same bytes as MatmulGroup's
  // pass. Does nothing where QuantizedInput(w) is null.
  void QuantizeInputRow(const WeightMatrix& w, const float* row, int r);
  // att = each row's attention over its context, per query head; on the
  // fast path quantized for wo by the tasks that made it, a KV head's
  // slice at a time, where those slices are whole activation blocks
  // (QuantizesAttentionOutput).
  void Attention(int layer, std::span<const ForwardItem> items, int n_rows);
  // Whether Attention quantizes its output for `wo` (QuantizedInput).
  bool QuantizesAttentionOutput(const WeightMatrix& wo) const;
  // Rows [row_begin, row_begin + rows) of att, the query heads of KV heads
  // [kv_head, kv_head + kv_heads), quantized for wo into QuantizedInput(wo).
  void QuantizeAttentionOutput(const WeightMatrix& wo, int row_begin, int rows, int kv_head, int kv_heads);
  // Whether batch row r continues row r - 1's fork group: both are decode
  // rows (items of one row each) that start on the same page, so
  // Attention folds their shared pages once.
  bool ContinuesForkGroup(std::span<const ForwardItem> items, int r) const;
  // Whether batch row r is a lone row: its item's only row, in no fork
  // group (a decode step of a session that shares no pages with its
  // neighbours in the batch).
  bool IsLoneRow(std::span<const ForwardItem> items, int n_rows, int r) const;
  // A lone row's attention for KV heads [task.kv_head, task.kv_head +
  // task.kv_heads) in one AttentionUpdateHeads call, so one thread reads
  // those heads' blocks of a page as one run. The same bits as a task per
  // KV head.
  void AttentionLoneTask(int layer, std::span<const ForwardItem> items, const AttentionTask& task, int thread);
  // KV heads per task of a lone row.
  int LoneRowHeadsPerTask() const;

  const ModelConfig& config_;
  const ModelWeights& weights_;
  ThreadPool* pool_;
  const int max_batch_tokens_;
  const int max_context_;
  const MatmulPath path_;
  const int max_pages_;  // most KV pages one sequence can have

  // Workspace, one row per batch row (rows = max_batch_tokens); the
  // shapes in llama2.c's notation, kv_dim = n_kv_heads * head_dim,
  // q_dim = n_heads * head_dim.
  std::vector<float> x_;        // x:   [rows][dim] the residual stream
  std::vector<float> xb_;       // xb:  [rows][max(dim, q_dim)] a normed matmul input, or a
                                //      matmul output before its residual add; at the end the
                                //      normed rows that want logits, gathered
  std::vector<float> q_;        // q:   [rows][q_dim]
  std::vector<float> k_, v_;    // k,v: [rows][kv_dim] this step's keys/values (then in the pages)
  std::vector<float> att_;      // att: [rows][q_dim] attention output per query head
  std::vector<float> hb_;       // hb:  [rows][ffn_dim] gate, then silu(gate) * up
  std::vector<float> hb2_;      // hb2: [rows][ffn_dim] up
  std::vector<float> rope_cs_;  // rope_cs: [rows][rope_dim] cos/sin pairs of the row's position
  std::vector<uint8_t> xq_;     // xq:  [kMaxGroup][rows][widest activation row bytes]
                                //      quantized matmul inputs (fast path)
  size_t xq_region_bytes_ = 0;  // bytes of one [rows][...] region of xq_
  std::vector<int> row_pos_;         // [rows] position of each batch row in its sequence
  std::vector<int> row_item_;        // [rows] item of each batch row
  std::vector<int> item_row_begin_;  // [items + 1] first batch row of each item
  std::vector<int> out_rows_;        // [rows] batch rows that produce logits
  std::vector<AttentionTask> attention_tasks_;
  // Per-thread scratch.
  std::vector<std::vector<float>> matmul_scratch_;
  std::vector<std::vector<float>> attention_scratch_;
  std::vector<std::vector<const void*>> attention_blocks_;  // K/V page pointers of one task's runs
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_TRANSFORMER_H_
