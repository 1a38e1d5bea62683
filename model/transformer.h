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
// Contract: Forward() validates the batch (token ids, context limit, batch
// size) and reserves KV space before changing anything; on error no
// sequence changes. On success each item's sequence grows by its token
// count. All buffers are allocated at construction: a Forward performs no
// heap allocation.
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
  // floats, in item order. Errors: InvalidArgument (bad token id, empty
  // item, batch larger than max_batch_tokens), OutOfRange (a sequence would
  // exceed max_context), ResourceExhausted (KV pool full).
  absl::Status Forward(std::span<const ForwardItem> items, float* logits);

 private:
  // A block of consecutive batch rows (queries) for one KV head.
  struct AttentionTask {
    int row_begin;  // batch row of the first query
    int rows;
    int kv_head;
  };

  // One matrix product of a group that shares its input.
  struct MatmulJob {
    const WeightMatrix* w;
    float* y;
    int64_t y_stride;
  };
  static constexpr int kMaxGroup = 3;

  absl::Status Validate(std::span<const ForwardItem> items) const;
  void Matmul(const WeightMatrix& w, const float* x, int nx, int64_t x_stride, float* y,
              int64_t y_stride);
  // Several products of the same input (Q/K/V, gate/up) in one pass of the
  // thread pool.
  void MatmulGroup(std::span<const MatmulJob> jobs, const float* x, int nx, int64_t x_stride);
  void Attention(int layer, std::span<const ForwardItem> items, int n_rows);

  const ModelConfig& config_;
  const ModelWeights& weights_;
  ThreadPool* pool_;
  const int max_batch_tokens_;
  const int max_context_;
  const MatmulPath path_;
  const int max_pages_;  // most KV pages one sequence can have

  // Workspace, rows = max_batch_tokens.
  std::vector<float> x_, xb_, q_, k_, v_, att_, hb_, hb2_, rope_cs_;
  std::vector<uint8_t> xq_;  // quantized activations (fast path), kMaxGroup regions
  size_t xq_region_bytes_ = 0;
  std::vector<int> row_pos_;                 // position of each batch row
  std::vector<int> row_item_;                // item of each batch row
  std::vector<int> item_row_begin_;          // first batch row of each item
  std::vector<int> out_rows_;                // batch rows that produce logits
  std::vector<AttentionTask> attention_tasks_;
  // Per-thread scratch.
  std::vector<std::vector<float>> matmul_scratch_;
  std::vector<std::vector<float>> attention_scratch_;
  std::vector<std::vector<const void*>> attention_blocks_;  // K/V page pointers of one call
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_TRANSFORMER_H_
