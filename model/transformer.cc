#include "model/transformer.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/attention_tile.h"
#include "kernels/dequantize.h"
#include "kernels/kv_dtype.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/q8_0_kv_blocks.h"
#include "kernels/rope.h"
#include "model/matmul_task_rows.h"

namespace kvs {
namespace {

constexpr int kMaxPageTokens = 256;
// Matmul tasks per thread: enough that dynamic hand-out evens out the
// threads (the last task of a matrix is the one the other thread waits
// for), unless the kernel asks for longer calls (MatmulMinCallRows).
constexpr int kTasksPerThread = 8;
// Calls of at most this many input rows run their tasks in spans (MatmulGroup).
constexpr int kStreamRowsMax = 16;
constexpr int kQueryBlockRows = 16;  // query rows per attention task

// Rows quantized per task when a matmul's input has many rows (prefill).
constexpr int kQuantizeRowsPerTask = 8;

// Row r of a [rows][width] workspace buffer.
float* Row(std::vector<float>& buf, int r, int64_t width) {
  return buf.data() + static_cast<size_t>(r) * width;
}

// True when positions [length, length + n) of `kv` are writable by this
// sequence alone: their pages exist, and none is shared with another
// sequence or held by the prefix cache (what PrepareAppend(n) ensures).
bool IsReserved(const KvSequence& kv, int n) {
  const int t = kv.geometry().page_tokens;
  const int first_page = kv.length() / t;
  const int last_page = (kv.length() + n - 1) / t;
  if (last_page >= kv.num_pages()) return false;
  const PagePool& pool = *kv.pool();
  for (int p = first_page; p <= last_page; ++p) {
    const PageId page = kv.page_table()[p];
    if (pool.ref_count(page) != 1 || pool.has_key(page)) return false;
  }
  return true;
}

}  // namespace

MatmulPath ParseMatmulPath(std::string_view name, bool* ok) {
  *ok = name == "fast" || name == "exact";
  return name == "exact" ? MatmulPath::kExact : MatmulPath::kFast;
}

const char* MatmulPathName(MatmulPath path) { return path == MatmulPath::kExact ? "exact" : "fast"; }

Transformer::Transformer(const ModelConfig& config, const ModelWeights& weights,
                         ThreadPool* pool, int max_batch_tokens, int max_context, MatmulPath path)
    : config_(config),
      weights_(weights),
      pool_(pool),
      max_batch_tokens_(max_batch_tokens),
      max_context_(std::min(max_context, config.context_length)),
      path_(path),
      max_pages_(max_context_ + 1) {  // pages of at least one token (any page size)
  const size_t m = static_cast<size_t>(max_batch_tokens);
  const ModelConfig& c = config_;
  x_.resize(m * c.dim);
  xb_.resize(m * std::max(c.dim, c.q_dim()));
  q_.resize(m * c.q_dim());
  k_.resize(m * c.kv_dim());
  v_.resize(m * c.kv_dim());
  att_.resize(m * c.q_dim());
  hb_.resize(m * c.ffn_dim);
  hb2_.resize(m * c.ffn_dim);
  rope_cs_.resize(m * c.rope_dim);
  row_pos_.resize(m);
  row_item_.resize(m);
  item_row_begin_.resize(m + 1);
  out_rows_.resize(m);
  attention_tasks_.reserve(m * c.n_kv_heads);

  if (path_ == MatmulPath::kFast) {
    size_t widest_row = 0;
    auto consider = [&](const WeightMatrix& w) {
      widest_row = std::max(widest_row, ActivationBytes(w.type, w.cols));
    };
    for (const LayerWeights& L : weights.layers) {
      for (const WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) consider(*w);
    }
    consider(weights.output);
    xq_region_bytes_ = m * widest_row;
    xq_.resize(kMaxGroup * xq_region_bytes_);
  }

  const int64_t widest = std::max({c.dim, c.ffn_dim, c.q_dim()});
  const int group_rows = kQueryBlockRows * c.group_size();
  matmul_scratch_.resize(pool_->size());
  attention_scratch_.resize(pool_->size());
  attention_blocks_.resize(pool_->size());
  for (int t = 0; t < pool_->size(); ++t) {
    matmul_scratch_[t].resize(MatmulScratchFloats(widest));
    attention_scratch_[t].resize(
        AttentionBlocksScratchFloats(max_context_ + kMaxPageTokens, kMaxPageTokens, c.head_dim, c.group_size()) +
        static_cast<size_t>(group_rows) * (2 + c.head_dim));
    // Room for a lone row's K and V lists too (AttentionLoneTask), so
    // decode steps never allocate.
    attention_blocks_[t].resize(2 * static_cast<size_t>(max_pages_) * LoneRowHeadsPerTask());
  }
}

KvGeometry Transformer::kv_geometry(int page_tokens, KvDtype dtype) const {
  KvGeometry g;
  g.n_layers = config_.n_layers;
  g.n_kv_heads = config_.n_kv_heads;
  g.head_dim = config_.head_dim;
  g.page_tokens = page_tokens;
  g.dtype = dtype;
  return g;
}

int Transformer::OutputRows(std::span<const ForwardItem> items) {
  int n = 0;
  for (const ForwardItem& it : items) {
    n += it.logits == Logits::kAll ? static_cast<int>(it.tokens.size()) : it.logits == Logits::kLast;
  }
  return n;
}

absl::Status Transformer::Validate(std::span<const ForwardItem> items) const {
  int64_t total = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const ForwardItem& it = items[i];
    if (it.tokens.empty()) return absl::InvalidArgumentError("forward item without tokens");
    for (size_t j = 0; j < i; ++j) {
      if (items[j].kv == it.kv) {
        return absl::InvalidArgumentError("a sequence appears twice in one forward batch");
      }
    }
    const KvGeometry& g = it.kv->geometry();
    if (g.n_layers != config_.n_layers || g.n_kv_heads != config_.n_kv_heads ||
        g.head_dim != config_.head_dim || g.page_tokens > kMaxPageTokens ||
        !(g == items[0].kv->geometry())) {
      return absl::InvalidArgumentError("KV sequence geometry does not match the model");
    }
    // The front ends refuse such a --kv-type first; every caller gets it here.
    if (!KvDtypeFitsHeadDim(g.dtype, g.head_dim)) {
      return absl::InvalidArgumentError(absl::StrCat("KV type ", KvDtypeName(g.dtype), " does not fit head_dim ",
                                                     g.head_dim));
    }
    for (int32_t t : it.tokens) {
      if (t < 0 || t >= config_.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("token id ", t, " is outside the vocabulary [0, ", config_.vocab_size, ")"));
      }
    }
    const int64_t new_length = it.kv->length() + static_cast<int64_t>(it.tokens.size());
    if (new_length > max_context_) {
      return absl::OutOfRangeError(absl::StrCat(
          "sequence of ", new_length, " tokens (", it.kv->length(), " cached + ", it.tokens.size(),
          " new) exceeds the context length of ", max_context_, " tokens"));
    }
    total += static_cast<int64_t>(it.tokens.size());
  }
  if (total > max_batch_tokens_) {
    return absl::InvalidArgumentError(absl::StrCat("batch of ", total,
                                                   " tokens exceeds max_batch_tokens ",
                                                   max_batch_tokens_));
  }
  return absl::OkStatus();
}

void Transformer::Matmul(const WeightMatrix& w, const float* x, int nx, int64_t x_stride, float* y,
                         int64_t y_stride, const uint8_t* quantized) {
  const MatmulJob job{&w, y, y_stride};
  MatmulGroup({&job, 1}, x, nx, x_stride, quantized);
}

const uint8_t* Transformer::QuantizedInput(const WeightMatrix& w) {
  if (path_ == MatmulPath::kExact || w.type == GgmlType::kF32) return nullptr;
  return xq_.data();
}

void Transformer::QuantizeInputRow(const WeightMatrix& w, const float* row, int r) {
  if (QuantizedInput(w) == nullptr) return;
  const size_t row_bytes = ActivationBytes(w.type, w.cols);
  QuantizeActivations(w.type, w.cols, row, 1, w.cols, xq_.data() + static_cast<size_t>(r) * row_bytes);
}

void Transformer::MatmulGroup(std::span<const MatmulJob> jobs, const float* x, int nx,
                              int64_t x_stride, const uint8_t* quantized) {
  // Split each matrix into chunks: enough for dynamic balance, each at
  // least as long as the kernel asks (MatmulMinCallRows: fan-out's packed
  // GEMM wants longer calls). Tasks of all matrices share one Run.
  int64_t chunk[kMaxGroup];
  int first_task[kMaxGroup + 1];
  first_task[0] = 0;
  static_assert(kMaxGroup <= kMaxSpanMatrices);
  int64_t rows[kMaxGroup];
  for (size_t i = 0; i < jobs.size(); ++i) {
    rows[i] = jobs[i].w->rows;
    const int64_t min_rows = path_ == MatmulPath::kExact ? 16 : MatmulMinCallRows(*jobs[i].w, nx);
    chunk[i] = std::max<int64_t>(min_rows, (rows[i] / (pool_->size() * kTasksPerThread) + 15) / 16 * 16);
  }
  // A call of up to kStreamRowsMax rows (decode, fan-out) reads its weights
  // once, from memory: each thread takes a span of consecutive tasks, so it
  // can ask for the weights of its next task (the rows after this one's)
  // while it finishes this one (ask_end; the AVX-512 kernel does for
  // fan-out's calls, and a single row's stream is the hardware
  // prefetcher's, packed_q8_0_avx512.cc). A task taken from another
  // thread's span asks for nothing past its own rows. Spans of long tasks
  // are evened out (matmul_task_rows.h: fan-out's 1,024-row matrices in
  // tasks of 192 rows would leave one thread waiting a sixth of the call).
  // Prefill's calls reuse each task's weights from cache; they keep the
  // shared counter.
  const bool spans = path_ == MatmulPath::kFast && nx <= kStreamRowsMax;
  if (spans) {
    EvenOutSpans(pool_->size(), std::span<const int64_t>(rows, jobs.size()), std::span<int64_t>(chunk, jobs.size()));
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    first_task[i + 1] = first_task[i] + static_cast<int>((rows[i] + chunk[i] - 1) / chunk[i]);
  }
  auto locate = [&](int task, size_t* job, int64_t* r0, int64_t* r1) {
    size_t i = 0;
    while (task >= first_task[i + 1]) ++i;
    *job = i;
    *r0 = (task - first_task[i]) * chunk[i];
    *r1 = std::min(jobs[i].w->rows, *r0 + chunk[i]);
  };

  if (path_ == MatmulPath::kExact) {
    pool_->Run(first_task[jobs.size()], [&](int task, int thread) {
      size_t j;
      int64_t r0, r1;
      locate(task, &j, &r0, &r1);
      MatmulRows(*jobs[j].w, r0, r1, x, nx, x_stride, jobs[j].y, jobs[j].y_stride,
                 matmul_scratch_[thread].data());
    });
    return;
  }
  // Fast path: quantize the input rows once per distinct weight type, then
  // every thread reads them.
  const uint8_t* xq[kMaxGroup];
  for (size_t i = 0; i < jobs.size(); ++i) {
    const WeightMatrix& w = *jobs[i].w;
    xq[i] = i == 0 ? quantized : nullptr;  // (region 0: QuantizedInput)
    for (size_t k = 0; k < i; ++k) {
      if (jobs[k].w->type == w.type && jobs[k].w->cols == w.cols) xq[i] = xq[k];
    }
    if (xq[i] != nullptr || w.type == GgmlType::kF32) continue;
    const size_t row_bytes = ActivationBytes(w.type, w.cols);
    uint8_t* out = xq_.data() + i * xq_region_bytes_;
    const int quantize_tasks = (nx + kQuantizeRowsPerTask - 1) / kQuantizeRowsPerTask;
    pool_->Run(quantize_tasks, [&](int task, int) {
      const int j0 = task * kQuantizeRowsPerTask;
      const int rows = std::min(kQuantizeRowsPerTask, nx - j0);
      QuantizeActivations(w.type, w.cols, x + j0 * x_stride, rows, x_stride, out + j0 * row_bytes);
    });
    xq[i] = out;
  }
  const int n_tasks = first_task[jobs.size()];
  auto task_fn = [&](int task, int thread) {
    size_t j;
    int64_t r0, r1;
    locate(task, &j, &r0, &r1);
    const MatmulJob& m = jobs[j];
    if (m.w->type == GgmlType::kF32) {
      MatmulRows(*m.w, r0, r1, x, nx, x_stride, m.y, m.y_stride, matmul_scratch_[thread].data());
      return;
    }
    const int span_begin = thread == 0 ? 0 : pool_->SpanEnd(n_tasks, thread - 1);
    const bool next_is_mine = spans && task >= span_begin && task + 1 < pool_->SpanEnd(n_tasks, thread) &&
                              task + 1 < first_task[j + 1];
    const int64_t ask_end = next_is_mine ? std::min(m.w->rows, r1 + chunk[j]) : 0;
    // This thread ran the task before (its span runs front to back) and
    // told it this one follows: that task asked for this one's first lines.
    const bool asked = spans && task > span_begin && task < pool_->SpanEnd(n_tasks, thread) &&
                       task - 1 >= first_task[j];
    MatmulRowsQuantized(*m.w, r0, r1, xq[j], nx, m.y, m.y_stride, ask_end, asked);
  };
  if (spans) {
    pool_->RunInSpans(n_tasks, task_fn);
  } else {
    pool_->Run(n_tasks, task_fn);
  }
}

bool Transformer::ContinuesForkGroup(std::span<const ForwardItem> items, int r) const {
  const int a = row_item_[r - 1], b = row_item_[r];
  if (a == b || item_row_begin_[a + 1] - item_row_begin_[a] != 1 ||
      item_row_begin_[b + 1] - item_row_begin_[b] != 1) {
    return false;
  }
  const std::vector<PageId>& pa = items[a].kv->page_table();
  const std::vector<PageId>& pb = items[b].kv->page_table();
  return !pa.empty() && !pb.empty() && pa[0] == pb[0];
}

bool Transformer::IsLoneRow(std::span<const ForwardItem> items, int n_rows, int r) const {
  const int item = row_item_[r];
  return item_row_begin_[item + 1] - item_row_begin_[item] == 1 && (r == 0 || !ContinuesForkGroup(items, r)) &&
         (r + 1 == n_rows || !ContinuesForkGroup(items, r + 1));
}

void Transformer::Attention(int layer, std::span<const ForwardItem> items, int n_rows) {
  const ModelConfig& c = config_;
  const int group = c.group_size();
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  // Blocks of up to kQueryBlockRows consecutive batch rows (of one item or
  // several) that are not lone rows, per KV head. A block ends early
  // rather than split a group of decode rows that start on the same page
  // (forks of one prompt, side by side: service/decode_row_order.h), so
  // the group's shared pages are folded once (AttentionUpdateRuns); a
  // group longer than a block is cut.
  auto same_prompt = [&](int r) { return ContinuesForkGroup(items, r); };
  auto lone = [&](int r) { return IsLoneRow(items, n_rows, r); };
  attention_tasks_.clear();
  for (int r = 0; r < n_rows;) {
    if (lone(r)) {
      ++r;
      continue;
    }
    int end = r + 1;
    while (end < n_rows && end - r < kQueryBlockRows && !lone(end)) ++end;
    if (end < n_rows && same_prompt(end)) {
      int group_begin = end - 1;
      while (group_begin > r && same_prompt(group_begin)) --group_begin;
      if (group_begin > r) end = group_begin;
    }
    attention_tasks_.push_back({r, end - r, 0, 1, false});
    r = end;
  }
  // Tasks head by head: the threads go through one KV head's pages
  // together, so those stay in the shared L3 from one row block to the
  // next (row blocks first, a 8,192-token prefill read 8 heads' K and V,
  // 17.6 MB of q8_0 per layer, between two uses of one head's).
  const size_t row_blocks = attention_tasks_.size();
  for (int h = 1; h < c.n_kv_heads; ++h) {
    for (size_t i = 0; i < row_blocks; ++i) {
      AttentionTask t = attention_tasks_[i];
      t.kv_head = h;
      attention_tasks_.push_back(t);
    }
  }
  // Then the lone rows (decode steps of sessions that share no pages with
  // their neighbours), each in shares of its KV heads: the pool hands out
  // tasks in order, so the small ones come last and even out the threads.
  const int per_task = LoneRowHeadsPerTask();
  for (int r = 0; r < n_rows; ++r) {
    if (!lone(r)) continue;
    for (int h0 = 0; h0 < c.n_kv_heads; h0 += per_task) {
      attention_tasks_.push_back({r, 1, h0, std::min(per_task, c.n_kv_heads - h0), true});
    }
  }
  const KvGeometry& g = items[0].kv->geometry();
  const int T = g.page_tokens;
  // Room for every item's K and V page pointers in each thread's list (it
  // grows only when a batch needs more than any before it).
  // Lone rows' lists were sized at construction.
  size_t block_pointers = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const int rows = item_row_begin_[i + 1] - item_row_begin_[i];
    if (rows > 1 || (rows == 1 && !lone(item_row_begin_[i]))) {
      block_pointers += 2 * static_cast<size_t>(row_pos_[item_row_begin_[i + 1] - 1] / T + 1);
    }
  }
  for (std::vector<const void*>& list : attention_blocks_) {
    if (list.size() < block_pointers) list.resize(block_pointers);
  }
  const WeightMatrix& wo = weights_.layers[layer].wo;
  const bool quantize_out = QuantizesAttentionOutput(wo);
  pool_->Run(static_cast<int>(attention_tasks_.size()), [&](int task_index, int thread) {
    const AttentionTask& task = attention_tasks_[task_index];
    if (task.lone_row) {
      AttentionLoneTask(layer, items, task, thread);
      if (quantize_out) QuantizeAttentionOutput(wo, task.row_begin, 1, task.kv_head, task.kv_heads);
      return;
    }
    const int nq = task.rows * group;
    float* scratch = attention_scratch_[thread].data();
    float* m = scratch + AttentionBlocksScratchFloats(max_context_ + kMaxPageTokens, kMaxPageTokens, c.head_dim,
                                                      c.group_size());
    float* l = m + nq;
    float* acc = l + nq;
    AttentionInit(nq, c.head_dim, m, l, acc);
    const float* q = q_.data() + static_cast<size_t>(task.row_begin) * c.q_dim() +
                     static_cast<size_t>(task.kv_head) * group * c.head_dim;
    // One run per item: its rows (a prefill block, or a decode row) over
    // its pages, each query folded in one online-softmax step over its
    // whole visible context, so its arithmetic never depends on the batch.
    // Forks decoding together share their prompt's pages: the kernel folds
    // those pages once for all of them (AttentionUpdateRuns).
    const void** blocks = attention_blocks_[thread].data();
    AttentionRun runs[kQueryBlockRows];
    int n_runs = 0;
    int visible[kQueryBlockRows];
    for (int r = 0; r < task.rows;) {
      const int item = row_item_[task.row_begin + r];
      int end = r + 1;
      while (end < task.rows && row_item_[task.row_begin + end] == item) ++end;
      const KvSequence& kv = *items[item].kv;
      const int n_pages = row_pos_[task.row_begin + end - 1] / T + 1;
      const void** k_blocks = blocks;
      const void** v_blocks = blocks + n_pages;
      blocks += 2 * n_pages;
      for (int p = 0; p < n_pages; ++p) {
        k_blocks[p] = kv.block(p, layer, KvPart::kKey, task.kv_head);
        v_blocks[p] = kv.block(p, layer, KvPart::kValue, task.kv_head);
      }
      for (int k = r; k < end; ++k) visible[k] = row_pos_[task.row_begin + k] + 1;
      runs[n_runs++] = {end - r, k_blocks, v_blocks, n_pages};
      r = end;
    }
    AttentionUpdateRuns(g.dtype, q, c.q_dim(), runs, n_runs, group, T, c.head_dim, visible, scale, m, l, acc,
                        scratch);
    float* out = att_.data() + static_cast<size_t>(task.row_begin) * c.q_dim() +
                 static_cast<size_t>(task.kv_head) * group * c.head_dim;
    AttentionFinish(task.rows, group, c.head_dim, l, acc, out, c.q_dim());
    if (quantize_out) QuantizeAttentionOutput(wo, task.row_begin, task.rows, task.kv_head, 1);
  });
}

bool Transformer::QuantizesAttentionOutput(const WeightMatrix& wo) const {
  const int64_t block = ActivationBlock(wo.type);
  return path_ == MatmulPath::kFast && block > 0 && config_.group_size() * config_.head_dim % block == 0;
}

void Transformer::QuantizeAttentionOutput(const WeightMatrix& wo, int row_begin, int rows, int kv_head,
                                          int kv_heads) {
  const int64_t width = static_cast<int64_t>(config_.group_size()) * config_.head_dim;
  const size_t row_bytes = ActivationBytes(wo.type, wo.cols);
  for (int r = row_begin; r < row_begin + rows; ++r) {
    QuantizeActivationColumns(wo.type, wo.cols, Row(att_, r, config_.q_dim()), kv_head * width,
                              (kv_head + kv_heads) * width, xq_.data() + static_cast<size_t>(r) * row_bytes);
  }
}

int Transformer::LoneRowHeadsPerTask() const {
  // An equal share of the KV heads per thread, as many as one tile of
  // queries and a task's state rows hold.
  const int threads = pool_->size();
  const int share = (config_.n_kv_heads + threads - 1) / threads;
  return std::max(1, std::min({share, kAttentionTileQueries / config_.group_size(), kQueryBlockRows}));
}

void Transformer::AttentionLoneTask(int layer, std::span<const ForwardItem> items, const AttentionTask& task,
                                    int thread) {
  const ModelConfig& c = config_;
  const int group = c.group_size();
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const int row = task.row_begin, h0 = task.kv_head, kv_heads = task.kv_heads;
  const KvSequence& kv = *items[row_item_[row]].kv;
  const int T = kv.geometry().page_tokens;
  const int n_pages = row_pos_[row] / T + 1;
  const int nq = kv_heads * group;
  float* scratch = attention_scratch_[thread].data();
  float* m = scratch + AttentionBlocksScratchFloats(max_context_ + kMaxPageTokens, kMaxPageTokens, c.head_dim,
                                                    c.group_size());
  float* l = m + nq;
  float* acc = l + nq;
  AttentionInit(nq, c.head_dim, m, l, acc);
  // Head h's K blocks, then its V blocks, per head in turn: 2 * kv_heads *
  // n_pages pointers, within the 2 * LoneRowHeadsPerTask() * max_pages_
  // each thread's list holds from construction (a decode step never
  // allocates).
  const void** k_blocks = attention_blocks_[thread].data();
  const void** v_blocks = k_blocks + static_cast<size_t>(kv_heads) * n_pages;
  for (int h = 0; h < kv_heads; ++h) {
    for (int p = 0; p < n_pages; ++p) {
      k_blocks[h * n_pages + p] = kv.block(p, layer, KvPart::kKey, h0 + h);
      v_blocks[h * n_pages + p] = kv.block(p, layer, KvPart::kValue, h0 + h);
    }
  }
  const size_t first_query = static_cast<size_t>(row) * c.q_dim() + static_cast<size_t>(h0) * group * c.head_dim;
  AttentionUpdateHeads(kv.geometry().dtype, q_.data() + first_query, group, kv_heads, k_blocks, v_blocks, n_pages, T,
                       c.head_dim, row_pos_[row] + 1, scale, m, l, acc, scratch);
  AttentionFinish(1, nq, c.head_dim, l, acc, att_.data() + first_query, c.q_dim());
}

absl::Status Transformer::CheckReserved(std::span<const ForwardItem> items) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (!IsReserved(*items[i].kv, static_cast<int>(items[i].tokens.size()))) {
      return absl::FailedPreconditionError(absl::StrCat(
          "forward item #", i, ": its KV positions are not reserved (KvSequence::PrepareAppend)"));
    }
  }
  return absl::OkStatus();
}

int Transformer::LayOutRows(std::span<const ForwardItem> items) {
  int n_rows = 0;
  for (int i = 0; i < static_cast<int>(items.size()); ++i) {
    item_row_begin_[i] = n_rows;
    const int start = items[i].kv->length();
    for (size_t t = 0; t < items[i].tokens.size(); ++t) {
      row_pos_[n_rows] = start + static_cast<int>(t);
      row_item_[n_rows] = i;
      ++n_rows;
    }
  }
  item_row_begin_[items.size()] = n_rows;
  return n_rows;
}

void Transformer::Embed(std::span<const ForwardItem> items, int n_rows) {
  const ModelConfig& c = config_;
  const ModelWeights& w = weights_;
  pool_->Run(n_rows, [&](int r, int) {
    const ForwardItem& it = items[row_item_[r]];
    const int32_t token = it.tokens[r - item_row_begin_[row_item_[r]]];
    DequantizeRow(w.token_embd.type, w.token_embd.row(token), Row(x_, r, c.dim), c.dim);
    RopeAngles(row_pos_[r] + it.rope_offset, w.rope_inv_freq.data(), c.rope_dim, Row(rope_cs_, r, c.rope_dim));
    AttentionInput(0, r);
  });
}

void Transformer::AttentionInput(int layer, int r) {
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[layer];
  float* xb = Row(xb_, r, c.dim);
  RmsNorm(Row(x_, r, c.dim), L.attn_norm, c.rms_eps, c.dim, xb);
  QuantizeInputRow(L.wq, xb, r);
}

void Transformer::FinishQkvRow(const LayerWeights& L, int layer, const ForwardItem& item, int r) {
  const ModelConfig& c = config_;
  float* q = Row(q_, r, c.q_dim());
  float* k = Row(k_, r, c.kv_dim());
  float* v = Row(v_, r, c.kv_dim());
  if (L.bq != nullptr) {
    AddInPlace(q, L.bq, c.q_dim());
    AddInPlace(k, L.bk, c.kv_dim());
    AddInPlace(v, L.bv, c.kv_dim());
  }
  if (L.q_norm != nullptr) {
    for (int h = 0; h < c.n_heads; ++h) {
      RmsNorm(q + h * c.head_dim, L.q_norm, c.rms_eps, c.head_dim, q + h * c.head_dim);
    }
    for (int h = 0; h < c.n_kv_heads; ++h) {
      RmsNorm(k + h * c.head_dim, L.k_norm, c.rms_eps, c.head_dim, k + h * c.head_dim);
    }
  }
  const float* cs = Row(rope_cs_, r, c.rope_dim);
  RopeApply(c.rope_style, q, c.n_heads, c.head_dim, c.rope_dim, cs);
  RopeApply(c.rope_style, k, c.n_kv_heads, c.head_dim, c.rope_dim, cs);
  // Store this row's K and V in its sequence's page.
  KvSequence& kv = *item.kv;
  for (int h = 0; h < c.n_kv_heads; ++h) {
    if (kv.geometry().dtype == KvDtype::kQ8_0) {  // q8_0 blocks are not rows (q8_0_kv_blocks.h)
      alignas(64) uint8_t row[kKvQ8_0MaxHeadDim / kKvQ8_0BlockValues * kKvQ8_0BlockBytes];
      const int t = kv.geometry().page_tokens, page = row_pos_[r] / t, slot = row_pos_[r] % t;
      StoreKv(KvDtype::kQ8_0, k + h * c.head_dim, row, c.head_dim);
      StoreQ8_0KeySlot(row, c.head_dim, slot, kv.block(page, layer, KvPart::kKey, h));
      StoreKv(KvDtype::kQ8_0, v + h * c.head_dim, row, c.head_dim);
      StoreQ8_0ValueSlot(row, c.head_dim, t, slot, kv.block(page, layer, KvPart::kValue, h));
    } else {
      StoreKv(kv.geometry().dtype, k + h * c.head_dim, kv.slot(row_pos_[r], layer, KvPart::kKey, h),
              c.head_dim);
      StoreKv(kv.geometry().dtype, v + h * c.head_dim, kv.slot(row_pos_[r], layer, KvPart::kValue, h),
              c.head_dim);
    }
  }
}

void Transformer::AttentionBlock(int layer, std::span<const ForwardItem> items, int n_rows) {
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[layer];
  const MatmulJob qkv[] = {{&L.wq, q_.data(), c.q_dim()},
                           {&L.wk, k_.data(), c.kv_dim()},
                           {&L.wv, v_.data(), c.kv_dim()}};
  MatmulGroup(qkv, xb_.data(), n_rows, c.dim, QuantizedInput(L.wq));
  pool_->Run(n_rows, [&](int r, int) { FinishQkvRow(L, layer, items[row_item_[r]], r); });
  Attention(layer, items, n_rows);
  Matmul(L.wo, att_.data(), n_rows, c.q_dim(), xb_.data(), c.dim,
         QuantizesAttentionOutput(L.wo) ? QuantizedInput(L.wo) : nullptr);
  pool_->Run(n_rows, [&](int r, int) {
    float* x = Row(x_, r, c.dim);
    float* xb = Row(xb_, r, c.dim);
    AddInPlace(x, xb, c.dim);
    RmsNorm(x, L.ffn_norm, c.rms_eps, c.dim, xb);
    QuantizeInputRow(L.w_gate, xb, r);
  });
}

void Transformer::FeedForwardBlock(int layer, int n_rows) {
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[layer];
  const MatmulJob gate_up[] = {{&L.w_gate, hb_.data(), c.ffn_dim}, {&L.w_up, hb2_.data(), c.ffn_dim}};
  MatmulGroup(gate_up, xb_.data(), n_rows, c.dim, QuantizedInput(L.w_gate));
  pool_->Run(n_rows, [&](int r, int) {
    float* hb = Row(hb_, r, c.ffn_dim);
    SiluMul(hb, Row(hb2_, r, c.ffn_dim), c.ffn_dim);
    QuantizeInputRow(L.w_down, hb, r);
  });
  Matmul(L.w_down, hb_.data(), n_rows, c.ffn_dim, xb_.data(), c.dim, QuantizedInput(L.w_down));
  const bool last = layer + 1 == c.n_layers;
  pool_->Run(n_rows, [&](int r, int) {
    AddInPlace(Row(x_, r, c.dim), Row(xb_, r, c.dim), c.dim);
    if (!last) AttentionInput(layer + 1, r);
  });
}

void Transformer::FinalNormAndLogits(std::span<const ForwardItem> items, float* logits) {
  const ModelConfig& c = config_;
  const ModelWeights& w = weights_;
  // The rows that produce logits, their final norm gathered into xb_.
  int n_out = 0;
  for (int i = 0; i < static_cast<int>(items.size()); ++i) {
    if (items[i].logits == Logits::kNone) continue;
    const int begin = items[i].logits == Logits::kAll ? item_row_begin_[i] : item_row_begin_[i + 1] - 1;
    for (int r = begin; r < item_row_begin_[i + 1]; ++r) out_rows_[n_out++] = r;
  }
  if (n_out == 0) return;
  pool_->Run(n_out, [&](int o, int) {
    float* xb = Row(xb_, o, c.dim);
    RmsNorm(Row(x_, out_rows_[o], c.dim), w.output_norm, c.rms_eps, c.dim, xb);
    QuantizeInputRow(w.output, xb, o);
  });
  Matmul(w.output, xb_.data(), n_out, c.dim, logits, c.vocab_size, QuantizedInput(w.output));
}

absl::Status Transformer::Forward(std::span<const ForwardItem> items, float* logits) {
  if (absl::Status s = Validate(items); !s.ok()) return s;
  if (absl::Status s = CheckReserved(items); !s.ok()) return s;
  const int n_rows = LayOutRows(items);
  Embed(items, n_rows);
  for (int layer = 0; layer < config_.n_layers; ++layer) {
    AttentionBlock(layer, items, n_rows);
    FeedForwardBlock(layer, n_rows);
  }
  FinalNormAndLogits(items, logits);
  for (const ForwardItem& it : items) it.kv->CommitAppend(static_cast<int>(it.tokens.size()));
  return absl::OkStatus();
}

}  // namespace kvs
