#include "tools/model_synth.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/quantize.h"
#include "model/gguf_file.h"
#include "model/gguf_writer.h"

namespace kvs {
namespace {

// Fills n_bytes of a `type` matrix of `cols` columns with random weights of
// standard deviation `std`, deterministic in `seed`.
void FillRandom(GgmlType type, int64_t cols, float std, uint64_t seed, uint8_t* dst,
                size_t n_bytes) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, std);
  const GgmlTypeTraits t = GgmlTraits(static_cast<uint32_t>(type));
  const size_t row_bytes = cols / t.block_elems * t.block_bytes;
  const size_t rows = n_bytes / row_bytes;
  if (CanQuantize(type)) {
    std::vector<float> row(cols);
    for (size_t r = 0; r < rows; ++r) {
      for (float& v : row) v = normal(rng);
      QuantizeRow(type, row.data(), dst + r * row_bytes, cols);
    }
    return;
  }
  // K-quants: random quants, scales chosen so the values have about `std`.
  for (size_t i = 0; i < n_bytes; ++i) dst[i] = static_cast<uint8_t>(rng());
  const size_t n_blocks = n_bytes / t.block_bytes;
  for (size_t b = 0; b < n_blocks; ++b) {
    uint8_t* blk = dst + b * t.block_bytes;
    if (type == GgmlType::kQ4_K) {
      auto* q = reinterpret_cast<BlockQ4_K*>(blk);
      // value = d*sc*q - dmin*m with q in 0..15, sc and m in 0..63 (~32 avg):
      // centre with dmin*m ~ d*sc*7.5, spread ~ d*32*4.6 = std.
      q->d = Fp32ToFp16(std / 147.0f);
      q->dmin = Fp32ToFp16(std / 147.0f * 7.5f);
      for (int j = 0; j < 12; ++j) q->scales[j] = static_cast<uint8_t>(rng());
    } else if (type == GgmlType::kQ6_K) {
      auto* q = reinterpret_cast<BlockQ6_K*>(blk);
      // value = d*sc*(q-32), q uniform 0..63 (std ~18.5), sc ~ 64.
      for (int j = 0; j < 16; ++j) q->scales[j] = static_cast<int8_t>(32 + rng() % 64);
      q->d = Fp32ToFp16(std / (18.5f * 64.0f));
    }
  }
}

absl::Status CopyVocabulary(const std::string& from, int vocab_size, GgufWriter* w) {
  absl::StatusOr<std::unique_ptr<GgufFile>> src = GgufFile::Open(from);
  if (!src.ok()) return src.status();
  absl::StatusOr<const std::vector<std::string_view>*> tokens =
      (*src)->GetStringArray("tokenizer.ggml.tokens");
  if (!tokens.ok()) return tokens.status();
  const int have = static_cast<int>((*tokens)->size());
  if (have > vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(from, " has ", have, " tokens, more than vocab_size ",
                                                   vocab_size));
  }
  std::vector<std::string> all((*tokens)->begin(), (*tokens)->end());
  for (int i = have; i < vocab_size; ++i) all.push_back(absl::StrCat("<|synth_", i, "|>"));
  w->AddStringArray("tokenizer.ggml.tokens", all);
  if (auto scores = (*src)->GetFloatArray("tokenizer.ggml.scores"); scores.ok()) {
    scores->resize(vocab_size, 0.0f);
    w->AddFloat32Array("tokenizer.ggml.scores", *scores);
  }
  if (auto types = (*src)->GetIntArray("tokenizer.ggml.token_type"); types.ok()) {
    std::vector<int32_t> t(types->begin(), types->end());
    t.resize(vocab_size, 4);  // filler tokens are user-defined
    w->AddInt32Array("tokenizer.ggml.token_type", t);
  }
  if (auto merges = (*src)->GetStringArray("tokenizer.ggml.merges"); merges.ok()) {
    w->AddStringArray("tokenizer.ggml.merges",
                      std::vector<std::string>((*merges)->begin(), (*merges)->end()));
  }
  for (const auto& [key, value] : (*src)->metadata()) {
    if (key.substr(0, 10) != "tokenizer." || value.type == GgufValueType::kArray) continue;
    std::string k(key);
    switch (value.type) {
      case GgufValueType::kString: w->AddString(k, std::string(value.str)); break;
      case GgufValueType::kBool: w->AddBool(k, value.b); break;
      case GgufValueType::kUint32: w->AddUint32(k, static_cast<uint32_t>(value.u)); break;
      case GgufValueType::kInt32: w->AddInt32(k, static_cast<int32_t>(value.i)); break;
      default: break;
    }
  }
  return absl::OkStatus();
}

void ByteVocabulary(int vocab_size, GgufWriter* w) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256 && static_cast<int>(tokens.size()) < vocab_size; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(6);
  }
  while (static_cast<int>(tokens.size()) < vocab_size) {
    tokens.push_back(absl::StrCat("<|synth_", tokens.size(), "|>"));
    types.push_back(4);
  }
  w->AddString("tokenizer.ggml.model", "llama");
  w->AddStringArray("tokenizer.ggml.tokens", tokens);
  w->AddFloat32Array("tokenizer.ggml.scores", std::vector<float>(vocab_size, 0.0f));
  w->AddInt32Array("tokenizer.ggml.token_type", types);
  w->AddUint32("tokenizer.ggml.bos_token_id", 1);
  w->AddUint32("tokenizer.ggml.eos_token_id", 2);
  w->AddUint32("tokenizer.ggml.unknown_token_id", 0);
}

}  // namespace

std::vector<float> Llama3RopeDivisors(const Llama3RopeScaling& scaling, float base, int rope_dim) {
  const double low_freq_wavelength = scaling.original_context / scaling.low_freq_factor;
  const double high_freq_wavelength = scaling.original_context / scaling.high_freq_factor;
  std::vector<float> divisors(rope_dim / 2);
  for (int i = 0; i < rope_dim / 2; ++i) {
    const double wavelength = 2 * M_PI * std::pow(static_cast<double>(base), 2.0 * i / rope_dim);
    double divisor = 1.0;
    if (wavelength > low_freq_wavelength) {
      divisor = scaling.factor;
    } else if (wavelength >= high_freq_wavelength) {
      const double smooth = (scaling.original_context / wavelength - scaling.low_freq_factor) /
                            (scaling.high_freq_factor - scaling.low_freq_factor);
      divisor = 1.0 / ((1.0 - smooth) / scaling.factor + smooth);
    }
    divisors[i] = static_cast<float>(divisor);
  }
  return divisors;
}

absl::Status WriteSynthModel(const SynthSpec& s, const std::string& path) {
  if (s.arch != "llama" && s.arch != "qwen2" && s.arch != "qwen3") {
    return absl::InvalidArgumentError(absl::StrCat("cannot synthesize architecture '", s.arch, "'"));
  }
  const int head_dim = s.head_dim > 0 ? s.head_dim : s.dim / s.n_heads;
  const int q_dim = s.n_heads * head_dim, kv_dim = s.n_kv_heads * head_dim;
  const std::string a = s.arch + ".";
  GgufWriter w;
  w.AddString("general.architecture", s.arch);
  w.AddString("general.name", s.name);
  w.AddUint32("general.alignment", 32);
  w.AddUint32(a + "context_length", s.context_length);
  w.AddUint32(a + "embedding_length", s.dim);
  w.AddUint32(a + "block_count", s.n_layers);
  w.AddUint32(a + "feed_forward_length", s.ffn_dim);
  w.AddUint32(a + "attention.head_count", s.n_heads);
  w.AddUint32(a + "attention.head_count_kv", s.n_kv_heads);
  w.AddUint32(a + "attention.key_length", head_dim);
  w.AddUint32(a + "attention.value_length", head_dim);
  w.AddUint32(a + "rope.dimension_count", head_dim);
  w.AddFloat32(a + "rope.freq_base", s.rope_freq_base);
  w.AddFloat32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  if (!s.rope_scaling_type.empty()) w.AddString(a + "rope.scaling.type", s.rope_scaling_type);
  if (s.rope_scaling_factor != 0) {
    w.AddFloat32(a + (s.rope_scale_linear_key ? "rope.scale_linear" : "rope.scaling.factor"), s.rope_scaling_factor);
  }
  w.AddUint32(a + "vocab_size", s.vocab_size);
  if (!s.vocab_from.empty()) {
    if (absl::Status st = CopyVocabulary(s.vocab_from, s.vocab_size, &w); !st.ok()) return st;
  } else {
    ByteVocabulary(s.vocab_size, &w);
  }

  uint64_t seed = s.seed * 1000003;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, float std) {
    const uint64_t tensor_seed = ++seed;
    const GgmlType type = s.weight_type;
    w.AddTensor(name, type, {cols, rows}, [=](uint8_t* dst, size_t n) {
      FillRandom(type, cols, std, tensor_seed, dst, n);
    });
  };
  auto vector = [&](const std::string& name, int64_t n, float mean, float std) {
    std::mt19937_64 rng(++seed);
    std::normal_distribution<float> normal(mean, std);
    std::string bytes(n * 4, '\0');
    for (int64_t i = 0; i < n; ++i) {
      float v = normal(rng);
      std::memcpy(&bytes[i * 4], &v, 4);
    }
    w.AddTensor(name, GgmlType::kF32, {n}, bytes);
  };

  if (s.llama3_rope) {
    const std::vector<float> divisors = Llama3RopeDivisors(*s.llama3_rope, s.rope_freq_base, head_dim);
    w.AddTensor("rope_freqs.weight", GgmlType::kF32, {static_cast<int64_t>(divisors.size())},
                std::string(reinterpret_cast<const char*>(divisors.data()), divisors.size() * 4));
  }
  const float out_std = s.init_std / std::sqrt(2.0f * s.n_layers);
  matrix("token_embd.weight", s.vocab_size, s.dim, 1.0f);
  for (int l = 0; l < s.n_layers; ++l) {
    const std::string b = absl::StrCat("blk.", l, ".");
    vector(b + "attn_norm.weight", s.dim, 1.0f, 0.05f);
    matrix(b + "attn_q.weight", q_dim, s.dim, s.init_std);
    matrix(b + "attn_k.weight", kv_dim, s.dim, s.init_std);
    matrix(b + "attn_v.weight", kv_dim, s.dim, s.init_std);
    if (s.arch == "qwen2") {
      vector(b + "attn_q.bias", q_dim, 0.0f, 0.02f);
      vector(b + "attn_k.bias", kv_dim, 0.0f, 0.02f);
      vector(b + "attn_v.bias", kv_dim, 0.0f, 0.02f);
    }
    if (s.arch == "qwen3") {
      vector(b + "attn_q_norm.weight", head_dim, 1.0f, 0.05f);
      vector(b + "attn_k_norm.weight", head_dim, 1.0f, 0.05f);
    }
    matrix(b + "attn_output.weight", s.dim, q_dim, out_std);
    vector(b + "ffn_norm.weight", s.dim, 1.0f, 0.05f);
    matrix(b + "ffn_gate.weight", s.ffn_dim, s.dim, s.init_std);
    matrix(b + "ffn_up.weight", s.ffn_dim, s.dim, s.init_std);
    matrix(b + "ffn_down.weight", s.dim, s.ffn_dim, out_std);
  }
  vector("output_norm.weight", s.dim, 1.0f, 0.05f);
  if (!s.tied_embeddings) matrix("output.weight", s.vocab_size, s.dim, s.init_std);
  return w.WriteFile(path);
}

}  // namespace kvs
