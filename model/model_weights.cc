#include "model/model_weights.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cache/slab_memory.h"
#include "kernels/dequantize.h"
#include "kernels/packed_q8_0.h"

namespace kvs {
namespace {

// Looks tensors up by name and checks their shapes and types.
class TensorBinder {
 public:
  TensorBinder(const GgufFile& gguf, std::vector<std::vector<float>>* owned)
      : gguf_(gguf), owned_(owned) {}

  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(gguf_.path(), ": ", what));
  }

  absl::StatusOr<const GgufTensor*> Find(const std::string& name, std::vector<int64_t> shape,
                                         bool required) {
    const GgufTensor* t = gguf_.FindTensor(name);
    if (t != nullptr) used_.insert(name);
    if (t == nullptr) {
      if (!required) return nullptr;
      return Error(absl::StrCat("tensor '", name, "' is missing"));
    }
    bool same = t->n_dims == static_cast<int>(shape.size());
    for (size_t d = 0; same && d < shape.size(); ++d) same = t->ne[d] == shape[d];
    if (!same) {
      return Error(absl::StrCat("tensor '", name, "' has shape ", t->ShapeString(),
                                ", expected [", absl::StrJoin(shape, ", "), "]"));
    }
    return t;
  }

  // A 2-D matrix of rows x cols, ggml shape [cols, rows].
  absl::StatusOr<WeightMatrix> Matrix(const std::string& name, int64_t rows, int64_t cols) {
    absl::StatusOr<const GgufTensor*> t = Find(name, {cols, rows}, true);
    if (!t.ok()) return t.status();
    const GgmlType type = static_cast<GgmlType>((*t)->type);
    if (!IsComputeType(type)) {
      return Error(absl::StrCat("tensor '", name, "' has type ", GgmlTypeName((*t)->type),
                                ", which kvsession does not support (supported: F32, F16, BF16, "
                                "Q8_0, Q4_0, Q4_K, Q6_K)"));
    }
    WeightMatrix m;
    m.type = type;
    m.data = (*t)->data;
    m.rows = rows;
    m.cols = cols;
    m.row_bytes = (*t)->n_bytes / rows;
    return m;
  }

  // A 1-D vector of n values, converted to F32; null when optional and absent.
  absl::StatusOr<const float*> Vector(const std::string& name, int64_t n, bool required) {
    absl::StatusOr<const GgufTensor*> t = Find(name, {n}, required);
    if (!t.ok()) return t.status();
    if (*t == nullptr) return nullptr;
    const GgmlType type = static_cast<GgmlType>((*t)->type);
    if (!IsComputeType(type)) {
      return Error(absl::StrCat("tensor '", name, "' has unsupported type ",
                                GgmlTypeName((*t)->type)));
    }
    std::vector<float> v(n);
    DequantizeRow(type, (*t)->data, v.data(), n);
    owned_->push_back(std::move(v));
    return owned_->back().data();
  }

  // INVALID_ARGUMENT naming the first tensor of the file no lookup asked
  // for. The forward pass would run without it (a Llama's attn_output or
  // ffn biases, a feature of another architecture), silently computing
  // something else than the file's model; llama.cpp refuses such a file
  // too ("wrong number of tensors").
  absl::Status CheckEveryTensorUsed() const {
    for (const GgufTensor& t : gguf_.tensors()) {
      if (!used_.contains(t.name)) {
        return Error(absl::StrCat("tensor ", QuoteGgufString(t.name),
                                  " is not used by kvsession's forward pass for this architecture, "
                                  "which would compute without it; the file's model is not supported"));
      }
    }
    return absl::OkStatus();
  }

 private:
  const GgufFile& gguf_;
  std::vector<std::vector<float>>* owned_;
  absl::flat_hash_set<std::string> used_;
};

#define KVS_ASSIGN(lhs, expr)              \
  do {                                     \
    auto _r = (expr);                      \
    if (!_r.ok()) return _r.status();      \
    lhs = *_r;                             \
  } while (0)

}  // namespace

absl::StatusOr<std::unique_ptr<ModelWeights>> ModelWeights::FromGguf(const GgufFile& gguf,
                                                                     const ModelConfig& c) {
  auto w = std::make_unique<ModelWeights>();
  TensorBinder bind(gguf, &w->owned_);
  // block_count is metadata: the last block must be in the file before
  // anything is sized by it.
  if (const std::string last = absl::StrCat("blk.", c.n_layers - 1, ".attn_norm.weight");
      gguf.FindTensor(last) == nullptr) {
    return bind.Error(absl::StrCat("tensor '", last, "' is missing (block_count ", c.n_layers, ")"));
  }
  // Norms and biases are copied; reserve so pointers into owned_ stay valid.
  w->owned_.reserve(8 * static_cast<size_t>(c.n_layers) + 4);

  KVS_ASSIGN(w->token_embd, bind.Matrix("token_embd.weight", c.vocab_size, c.dim));
  KVS_ASSIGN(w->output_norm, bind.Vector("output_norm.weight", c.dim, true));
  if (gguf.FindTensor("output.weight") != nullptr) {
    KVS_ASSIGN(w->output, bind.Matrix("output.weight", c.vocab_size, c.dim));
  } else {
    w->output = w->token_embd;
    w->tied_embeddings = true;
  }
  w->layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights& L = w->layers[l];
    const std::string b = absl::StrCat("blk.", l, ".");
    KVS_ASSIGN(L.attn_norm, bind.Vector(b + "attn_norm.weight", c.dim, true));
    KVS_ASSIGN(L.wq, bind.Matrix(b + "attn_q.weight", c.q_dim(), c.dim));
    KVS_ASSIGN(L.wk, bind.Matrix(b + "attn_k.weight", c.kv_dim(), c.dim));
    KVS_ASSIGN(L.wv, bind.Matrix(b + "attn_v.weight", c.kv_dim(), c.dim));
    KVS_ASSIGN(L.wo, bind.Matrix(b + "attn_output.weight", c.dim, c.q_dim()));
    // Biases: required for qwen2, honoured when present for the others.
    KVS_ASSIGN(L.bq, bind.Vector(b + "attn_q.bias", c.q_dim(), c.qkv_bias));
    KVS_ASSIGN(L.bk, bind.Vector(b + "attn_k.bias", c.kv_dim(), c.qkv_bias));
    KVS_ASSIGN(L.bv, bind.Vector(b + "attn_v.bias", c.kv_dim(), c.qkv_bias));
    KVS_ASSIGN(L.q_norm, bind.Vector(b + "attn_q_norm.weight", c.head_dim, c.qk_norm));
    KVS_ASSIGN(L.k_norm, bind.Vector(b + "attn_k_norm.weight", c.head_dim, c.qk_norm));
    // The forward pass adds the three biases, and applies the two norms,
    // together (transformer.cc FinishQkvRow).
    if ((L.bq != nullptr) != (L.bk != nullptr) || (L.bq != nullptr) != (L.bv != nullptr)) {
      return bind.Error(absl::StrCat("block ", l, " has some of attn_q.bias, attn_k.bias and attn_v.bias "
                                     "but not all three"));
    }
    if ((L.q_norm != nullptr) != (L.k_norm != nullptr)) {
      return bind.Error(absl::StrCat("block ", l, " has one of attn_q_norm and attn_k_norm but not both"));
    }
    KVS_ASSIGN(L.ffn_norm, bind.Vector(b + "ffn_norm.weight", c.dim, true));
    KVS_ASSIGN(L.w_gate, bind.Matrix(b + "ffn_gate.weight", c.ffn_dim, c.dim));
    KVS_ASSIGN(L.w_up, bind.Matrix(b + "ffn_up.weight", c.ffn_dim, c.dim));
    KVS_ASSIGN(L.w_down, bind.Matrix(b + "ffn_down.weight", c.dim, c.ffn_dim));
    for (const WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
      w->matrix_bytes += m->rows * m->row_bytes;
    }
  }
  w->matrix_bytes += w->output.rows * w->output.row_bytes;

  // RoPE frequencies: base^(-2i/rope_dim), divided by per-pair factors when
  // the file has `rope_freqs.weight` (Llama 3.1 style long-context scaling).
  const float* factors = nullptr;
  KVS_ASSIGN(factors, bind.Vector("rope_freqs.weight", c.rope_dim / 2, false));
  w->rope_inv_freq.resize(c.rope_dim / 2);
  for (int i = 0; factors != nullptr && i < c.rope_dim / 2; ++i) {
    if (!(std::isfinite(factors[i]) && factors[i] > 0)) {
      return bind.Error(absl::StrCat("rope_freqs.weight[", i, "] = ", factors[i], " is not finite and > 0"));
    }
  }
  for (int i = 0; i < c.rope_dim / 2; ++i) {
    double f = std::pow(static_cast<double>(c.rope_freq_base), -2.0 * i / c.rope_dim);
    if (factors != nullptr) f /= factors[i];
    w->rope_inv_freq[i] = static_cast<float>(f * c.rope_scale);
  }
  if (absl::Status st = bind.CheckEveryTensorUsed(); !st.ok()) return st;
  return w;
}

int64_t ModelWeights::PackForFastPath() {
  if (!PackedQ8_0Supported()) return 0;
  // In the order a forward pass reads them, so one token's read is one
  // stream through the arena.
  std::vector<std::pair<WeightMatrix*, bool>> to_pack;  // matrix, release its GGUF pages
  for (LayerWeights& L : layers) {
    for (WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
      to_pack.emplace_back(m, true);
    }
  }
  // Tied embeddings keep their GGUF rows hot: the embedding lookup reads them.
  to_pack.emplace_back(&output, !tied_embeddings);
  std::erase_if(to_pack, [](const auto& p) { return p.first->type != GgmlType::kQ8_0 || p.first->packed != nullptr; });
  size_t total = 0;
  for (const auto& [m, release] : to_pack) total += (PackedQ8_0Bytes(m->rows, m->cols) + 63) / 64 * 64;
  if (to_pack.empty() || !packed_.Reserve(total)) return 0;
  // Each matrix's slice of the arena is taken in order first; then threads
  // pack runs of kGroupsATask groups, the next run to whoever is free. Most
  // of a load's packing is the kernel supplying the arena's fresh pages,
  // and that scales with cores: on a 2-core VM whose host backs memory on
  // first touch, 512 MiB took 1.0 s to populate on one thread and 0.6 s on
  // two, and a 0.6B Q8_0 model's start-up without warm KV pages went from
  // 1.77-1.87 to 1.35-1.65 s (docs/operations.md, on start-up).
  constexpr int64_t kGroupsATask = 256;
  struct Task {
    const WeightMatrix* m;
    uint8_t* out;    // the matrix's slice
    int64_t g0, g1;  // groups of 16 rows
  };
  std::vector<Task> tasks;
  for (const auto& [m, release] : to_pack) {
    uint8_t* out = packed_.Take(PackedQ8_0Bytes(m->rows, m->cols));
    m->packed = out;
    const int64_t groups = (m->rows + 15) / 16;
    for (int64_t g = 0; g < groups; g += kGroupsATask) tasks.push_back({m, out, g, std::min(groups, g + kGroupsATask)});
  }
  std::atomic<size_t> next{0};
  RunOnEveryCore([&](int) {
    for (size_t t; (t = next.fetch_add(1, std::memory_order_relaxed)) < tasks.size();) {
      const Task& task = tasks[t];
      const WeightMatrix& m = *task.m;
      PackQ8_0(m.data + task.g0 * 16 * m.row_bytes, m.row_bytes, std::min(m.rows, task.g1 * 16) - task.g0 * 16,
               m.cols, task.out + task.g0 * PackedQ8_0GroupBytes(m.cols));
    }
  });
  for (const auto& [m, release_original] : to_pack) {
    if (release_original) {
      // Whole pages inside the tensor only.
      const uintptr_t page = 4096;
      const uintptr_t begin = (reinterpret_cast<uintptr_t>(m->data) + page - 1) & ~(page - 1);
      const uintptr_t end = (reinterpret_cast<uintptr_t>(m->data) + m->rows * m->row_bytes) & ~(page - 1);
      if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
    }
  }
  return static_cast<int64_t>(total);
}

}  // namespace kvs
