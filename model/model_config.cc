#include "model/model_config.h"

#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace kvs {
namespace {

absl::Status Invalid(const GgufFile& f, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(f.path(), ": ", what));
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfig::FromGguf(const GgufFile& gguf) {
  ModelConfig c;
  absl::StatusOr<std::string_view> arch = gguf.GetString("general.architecture");
  if (!arch.ok()) return arch.status();
  c.arch_name = std::string(*arch);
  if (c.arch_name == "llama") {
    c.arch = Architecture::kLlama;
    c.rope_style = RopeStyle::kAdjacent;
  } else if (c.arch_name == "qwen2") {
    c.arch = Architecture::kQwen2;
    c.rope_style = RopeStyle::kNeox;
    c.qkv_bias = true;
  } else if (c.arch_name == "qwen3") {
    c.arch = Architecture::kQwen3;
    c.rope_style = RopeStyle::kNeox;
    c.qk_norm = true;
  } else {
    return Invalid(gguf, absl::StrCat("unsupported architecture ", QuoteGgufString(c.arch_name),
                                      " (supported: llama, qwen2, qwen3)"));
  }
  c.name = std::string(gguf.GetString("general.name", "").value_or(""));
  if (c.name.empty()) c.name = std::filesystem::path(gguf.path()).stem().string();

  const std::string p = c.arch_name + ".";
  // Reads a required positive integer that fits an int.
  auto get_int = [&](const std::string& key, std::optional<uint64_t> fallback,
                     int* out) -> absl::Status {
    absl::StatusOr<uint64_t> v = gguf.GetUint(key, fallback);
    if (!v.ok()) return v.status();
    if (*v == 0 || *v > (1u << 30)) {
      return Invalid(gguf, absl::StrCat("metadata ", QuoteGgufString(key), " = ", *v, " is out of range"));
    }
    *out = static_cast<int>(*v);
    return absl::OkStatus();
  };
  if (auto s = get_int(p + "block_count", {}, &c.n_layers); !s.ok()) return s;
  if (auto s = get_int(p + "embedding_length", {}, &c.dim); !s.ok()) return s;
  if (auto s = get_int(p + "attention.head_count", {}, &c.n_heads); !s.ok()) return s;
  if (auto s = get_int(p + "attention.head_count_kv", c.n_heads, &c.n_kv_heads); !s.ok()) return s;
  if (auto s = get_int(p + "feed_forward_length", {}, &c.ffn_dim); !s.ok()) return s;
  if (auto s = get_int(p + "context_length", {}, &c.context_length); !s.ok()) return s;
  if (c.dim % c.n_heads != 0 && gguf.Find(p + "attention.key_length") == nullptr) {
    return Invalid(gguf, "embedding_length is not a multiple of head_count and no key_length");
  }
  if (auto s = get_int(p + "attention.key_length", c.dim / c.n_heads, &c.head_dim); !s.ok()) {
    return s;
  }
  int value_length = 0;
  if (auto s = get_int(p + "attention.value_length", c.head_dim, &value_length); !s.ok()) {
    return s;
  }
  if (value_length != c.head_dim) {
    return Invalid(gguf, absl::StrCat("key_length ", c.head_dim, " != value_length ",
                                      value_length, " is not supported"));
  }
  // The projections' widths: each factor is checked above, their products
  // must fit an int too (and no model comes near this).
  constexpr int64_t kMaxHeadsWidth = int64_t{1} << 20;
  if (int64_t{c.n_heads} * c.head_dim > kMaxHeadsWidth) {
    return Invalid(gguf, absl::StrCat("head_count ", c.n_heads, " x key_length ", c.head_dim,
                                      " is more than ", kMaxHeadsWidth));
  }
  if (auto s = get_int(p + "rope.dimension_count", c.head_dim, &c.rope_dim); !s.ok()) return s;
  if (c.n_heads % c.n_kv_heads != 0) {
    return Invalid(gguf, absl::StrCat("head_count ", c.n_heads,
                                      " is not a multiple of head_count_kv ", c.n_kv_heads));
  }
  if (c.rope_dim > c.head_dim || c.rope_dim % 2 != 0 || c.head_dim % 2 != 0) {
    return Invalid(gguf, absl::StrCat("rope dimension ", c.rope_dim, " does not fit head_dim ",
                                      c.head_dim));
  }
  absl::StatusOr<double> base = gguf.GetFloat(p + "rope.freq_base", 10000.0);
  if (!base.ok()) return base.status();
  absl::StatusOr<double> eps = gguf.GetFloat(p + "attention.layer_norm_rms_epsilon", 1e-5);
  if (!eps.ok()) return eps.status();
  if (!(std::isfinite(*base) && *base > 0) || !(std::isfinite(*eps) && *eps > 0)) {
    return Invalid(gguf, "rope freq_base and rms epsilon must be finite and > 0");
  }
  c.rope_freq_base = static_cast<float>(*base);
  c.rms_eps = static_cast<float>(*eps);

  // As llama.cpp reads them: the type is "linear" unless the file says
  // otherwise, the factor is rope.scaling.factor or the older
  // rope.scale_linear (0 or absent: none), and type "none" never scales.
  absl::StatusOr<std::string_view> scaling = gguf.GetString(p + "rope.scaling.type", "linear");
  if (!scaling.ok()) return scaling.status();
  if (*scaling != "linear" && *scaling != "none") {
    return Invalid(gguf, absl::StrCat("rope scaling ", QuoteGgufString(*scaling),
                                      " is not supported (supported: none, linear)"));
  }
  const std::string factor_key =
      gguf.Find(p + "rope.scaling.factor") != nullptr || gguf.Find(p + "rope.scale_linear") == nullptr
          ? p + "rope.scaling.factor"
          : p + "rope.scale_linear";
  absl::StatusOr<double> factor = gguf.GetFloat(factor_key, 0.0);
  if (!factor.ok()) return factor.status();
  if (!std::isfinite(*factor) || *factor < 0) {
    return Invalid(gguf, absl::StrCat("metadata ", QuoteGgufString(factor_key), " must be finite and >= 0"));
  }
  if (*scaling == "linear" && *factor > 0) c.rope_scale = static_cast<float>(1.0 / *factor);

  const GgufTensor* embd = gguf.FindTensor("token_embd.weight");
  if (embd == nullptr) return Invalid(gguf, "tensor 'token_embd.weight' is missing");
  if (embd->n_dims != 2) return Invalid(gguf, "token_embd.weight must be 2-D");
  c.vocab_size = static_cast<int>(embd->ne[1]);
  return c;
}

}  // namespace kvs
