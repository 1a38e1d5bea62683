// Model synthesizer: writes a GGUF file of any llama / qwen2 / qwen3 shape
// and weight type with random weights, laid out the way llama.cpp's
// converter writes real models (same metadata keys, tensor names, shapes
// and types), so llama.cpp loads it too.
//
// Weights are N(0, init_std) (output projections scaled down by depth) so
// activations stay finite through many layers. Q4_K and Q6_K blocks are
// filled with random quants and scales directly.
//
// The vocabulary (tokenizer.* metadata) is copied from another GGUF
// (`vocab_from`), padded with "<|synth_N|>" filler tokens up to vocab_size;
// without one, a tiny byte vocabulary is generated.
//
// Llama 3 RoPE scaling (SynthSpec::llama3_rope) is written the way
// llama.cpp's converter writes it: a `rope_freqs.weight` vector of one
// divisor per rotated pair.
#ifndef KVSESSION_TOOLS_MODEL_SYNTH_H_
#define KVSESSION_TOOLS_MODEL_SYNTH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/ggml_types.h"

namespace kvs {

// Llama 3's long-context RoPE scaling (Hugging Face's rope_type "llama3"):
// pairs whose wavelength exceeds original_context / low_freq_factor turn
// `factor` times slower, pairs shorter than original_context /
// high_freq_factor keep their frequency, and those between blend the two.
struct Llama3RopeScaling {
  float factor = 32.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_context = 8192;
};

struct SynthSpec {
  std::string arch = "llama";  // llama | qwen2 | qwen3
  std::string name = "synthetic";
  int n_layers = 2;
  int dim = 64;
  int n_heads = 4;
  int n_kv_heads = 4;
  int head_dim = 0;  // 0: dim / n_heads
  int ffn_dim = 128;
  int vocab_size = 256;
  int context_length = 512;
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-6f;
  GgmlType weight_type = GgmlType::kF32;  // every 2-D matrix
  bool tied_embeddings = false;
  uint64_t seed = 1;
  float init_std = 0.02f;
  std::string vocab_from;  // GGUF to copy the tokenizer from ("" = byte vocab)
  std::optional<Llama3RopeScaling> llama3_rope;  // nullopt: unscaled RoPE
  // Linear RoPE scaling metadata, each key written only when set:
  // rope.scaling.type ("" = no key) and the factor (0 = no key), under
  // rope.scaling.factor or, with rope_scale_linear_key, the older
  // rope.scale_linear.
  std::string rope_scaling_type;
  float rope_scaling_factor = 0;
  bool rope_scale_linear_key = false;
};

// The per-pair divisors of the RoPE frequencies base^(-2i/rope_dim),
// i < rope_dim / 2, that `scaling` gives.
std::vector<float> Llama3RopeDivisors(const Llama3RopeScaling& scaling, float base, int rope_dim);

absl::Status WriteSynthModel(const SynthSpec& spec, const std::string& path);

}  // namespace kvs

#endif  // KVSESSION_TOOLS_MODEL_SYNTH_H_
