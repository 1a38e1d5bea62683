// ModelWeights: typed views of a model's tensors inside the mapped GGUF
// file, checked against the ModelConfig's shapes.
//
// Matrices keep their file type (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K) and
// are read in place. Norm weights and biases are small vectors converted to
// F32 copies owned here. Tied embeddings (no `output.weight`) reuse
// `token_embd.weight` as the output matrix. FromGguf: INVALID_ARGUMENT
// naming the tensor for one missing, of the wrong shape or type, or one in
// the file that the forward pass would not use (a bias or a layer of a
// feature it lacks: computing without it is another model).
//
// Ownership: borrows the GgufFile's mapping (which must outlive this) and
// owns the F32 copies.
#ifndef KVSESSION_MODEL_MODEL_WEIGHTS_H_
#define KVSESSION_MODEL_MODEL_WEIGHTS_H_

#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/matmul.h"
#include "model/gguf_file.h"
#include "model/huge_page_arena.h"
#include "model/model_config.h"

namespace kvs {

struct LayerWeights {
  const float* attn_norm = nullptr;  // [dim]
  WeightMatrix wq, wk, wv, wo;       // wq: q_dim x dim, wk/wv: kv_dim x dim, wo: dim x q_dim
  const float* bq = nullptr;         // qwen2 biases, else null
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* q_norm = nullptr;  // qwen3: [head_dim], else null
  const float* k_norm = nullptr;
  const float* ffn_norm = nullptr;         // [dim]
  WeightMatrix w_gate, w_up, w_down;       // gate/up: ffn x dim, down: dim x ffn
};

struct ModelWeights {
  WeightMatrix token_embd;  // vocab x dim
  const float* output_norm = nullptr;
  WeightMatrix output;  // vocab x dim (token_embd when tied)
  bool tied_embeddings = false;
  std::vector<LayerWeights> layers;
  std::vector<float> rope_inv_freq;  // [rope_dim / 2], includes rope_freqs factors
  uint64_t matrix_bytes = 0;         // bytes of all matrices read per token

  static absl::StatusOr<std::unique_ptr<ModelWeights>> FromGguf(const GgufFile& gguf,
                                                               const ModelConfig& config);

  // Re-lays out every Q8_0 matrix for the fast path (kernels/packed_q8_0.h)
  // when this CPU runs packed Q8_0, and lets the kernel drop the GGUF
  // copies' pages from memory (the exact path can still read them: they
  // come back from the file on access). The packed matrices lie in one
  // HugePageArena in the order a forward pass reads them, packed by one
  // thread per core (up to 8) before it returns. Returns the
  // bytes packed: 0 when this CPU has no packed path, nothing is Q8_0, it
  // was already called, or the arena cannot be mapped (then the fast path
  // reads the GGUF layout, as on CPUs without the packed kernels).
  int64_t PackForFastPath();

 private:
  std::vector<std::vector<float>> owned_;  // F32 copies of small vectors
  HugePageArena packed_;                   // packed Q8_0 matrices, in reading order
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_MODEL_WEIGHTS_H_
