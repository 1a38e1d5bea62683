#include "tools/model_presets.h"

#include <string>

namespace kvs {
namespace {

// One published configuration (the model's config.json).
struct PresetShape {
  std::string_view name;
  const char* arch;
  int layers, dim, heads, kv_heads, head_dim, ffn, vocab, context;
  float rope_base, rms_eps;
  std::optional<Llama3RopeScaling> llama3_rope;
};

const PresetShape kPresets[] = {
    // name, arch, layers, dim, heads, kv heads, head dim, ffn, vocab, context, rope base, rms eps
    // Qwen/Qwen3-0.6B: GQA 2, heads of 128, per-head Q/K norms.
    {"qwen3-0.6b", "qwen3", 28, 1024, 16, 8, 128, 3072, 151936, 40960, 1e6f, 1e-6f, std::nullopt},
    // Qwen/Qwen2.5-0.5B: GQA 7, heads of 64, biases on Q, K and V.
    {"qwen2.5-0.5b", "qwen2", 24, 896, 14, 2, 64, 4864, 151936, 32768, 1e6f, 1e-6f, std::nullopt},
    // meta-llama/Llama-3.2-1B: GQA 4, heads of 64, Llama 3 RoPE scaling
    // (factor 32, low_freq_factor 1, high_freq_factor 4, original context 8,192).
    {"llama3.2-1b", "llama", 16, 2048, 32, 8, 64, 8192, 128256, 131072, 500000.0f, 1e-5f,
     Llama3RopeScaling{32.0f, 1.0f, 4.0f, 8192}},
};

}  // namespace

std::optional<SynthSpec> FindModelPreset(std::string_view name) {
  for (const PresetShape& p : kPresets) {
    if (p.name != name) continue;
    SynthSpec s;
    s.arch = p.arch;
    s.name = std::string("synthetic-") + std::string(p.name);
    s.n_layers = p.layers;
    s.dim = p.dim;
    s.n_heads = p.heads;
    s.n_kv_heads = p.kv_heads;
    s.head_dim = p.head_dim;
    s.ffn_dim = p.ffn;
    s.vocab_size = p.vocab;
    s.context_length = p.context;
    s.rope_freq_base = p.rope_base;
    s.rms_eps = p.rms_eps;
    s.llama3_rope = p.llama3_rope;
    s.weight_type = GgmlType::kQ8_0;
    s.tied_embeddings = true;  // all three tie the output to the embeddings
    return s;
  }
  return std::nullopt;
}

std::vector<std::string> ModelPresetNames() {
  std::vector<std::string> names;
  for (const PresetShape& p : kPresets) names.emplace_back(p.name);
  return names;
}

}  // namespace kvs
