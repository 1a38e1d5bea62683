// ModelConfig: the hyper-parameters of a transformer, read from GGUF
// metadata (`<arch>.block_count`, `<arch>.embedding_length`, ...).
//
// Supported architectures:
//   llama : Llama 2/3, SmolLM2, TinyLlama, Mistral (no sliding window);
//           RoPE on adjacent pairs.
//   qwen2 : biases on Q/K/V; RoPE on NEOX halves.
//   qwen3 : per-head RMSNorm on Q and K; NEOX RoPE; head_dim may differ
//           from dim / n_heads.
// Anything else is InvalidArgument at load, naming the architecture.
#ifndef KVSESSION_MODEL_MODEL_CONFIG_H_
#define KVSESSION_MODEL_MODEL_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "kernels/rope.h"
#include "model/gguf_file.h"

namespace kvs {

enum class Architecture { kLlama, kQwen2, kQwen3 };

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string arch_name;  // as in general.architecture
  std::string name;       // general.name, or the file name
  int n_layers = 0;
  int dim = 0;         // embedding width
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads (GQA when < n_heads)
  int head_dim = 0;
  int ffn_dim = 0;
  int vocab_size = 0;
  int context_length = 0;  // the training context (n_ctx_train)
  int rope_dim = 0;        // leading dims of each head that rotate
  float rope_freq_base = 10000.0f;
  float rope_scale = 1.0f;  // linear position scaling (positions / factor)
  float rms_eps = 1e-5f;
  RopeStyle rope_style = RopeStyle::kAdjacent;
  bool qkv_bias = false;
  bool qk_norm = false;

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  int group_size() const { return n_heads / n_kv_heads; }

  static absl::StatusOr<ModelConfig> FromGguf(const GgufFile& gguf);
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_MODEL_CONFIG_H_
