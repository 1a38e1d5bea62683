// kvs-synth-model: writes a GGUF model of any llama / qwen2 / qwen3 shape
// and weight type with random weights (tools/model_synth.h), loadable by
// kvsession and by llama.cpp (same metadata keys and tensor names).
//
//   kvs-synth-model --out M.gguf [--preset qwen3-0.6b|qwen2.5-0.5b|llama3.2-1b] [--arch qwen3]
//       [--layers 28 --dim 1024 --heads 16 --kv-heads 8 --head-dim 128
//        --ffn 3072 --vocab 151936 --context 40960 --type q8_0 --tied]
//       [--vocab-from ../shared/vocab/ggml-vocab-gpt-2.gguf] [--seed 1]
//
// --preset NAME starts from a published model's shape (tools/model_presets.h:
// Qwen3-0.6B, the benchmarks' model; Qwen2.5-0.5B; Llama 3.2 1B), Q8_0;
// the other flags override it (for example --vocab 50257 --vocab-from a
// smaller vocabulary, or --type).
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "client/cli_args.h"
#include "tools/model_presets.h"
#include "tools/model_synth.h"

namespace kvs {
namespace {

bool ParseType(std::string name, GgmlType* type) {
  name = absl::AsciiStrToUpper(name);
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                     GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    if (GgmlTypeName(static_cast<uint32_t>(t)) == name) {
      *type = t;
      return true;
    }
  }
  return false;
}

int Main(int argc, char** argv) {
  auto args = CliArgs::Parse(std::vector<std::string>(argv + 1, argv + argc),
                             {"out", "preset", "arch", "layers", "dim", "heads", "kv-heads",
                              "head-dim", "ffn", "vocab", "context", "type", "vocab-from", "seed",
                              "name", "rope-base"},
                             {"tied"});
  if (!args.ok() || !args->Has("out")) {
    std::cerr << "usage: kvs-synth-model --out M.gguf [--preset qwen3-0.6b|qwen2.5-0.5b|llama3.2-1b] "
                 "[--arch A --layers N --dim D --heads H --kv-heads K --head-dim HD --ffn F --vocab V --context C "
                 "--type q8_0 --tied --vocab-from V.gguf --seed S]\n";
    if (!args.ok()) std::cerr << args.status().message() << "\n";
    return 2;
  }
  SynthSpec spec;
  if (args->Has("preset")) {
    std::optional<SynthSpec> preset = FindModelPreset(args->GetOr("preset", ""));
    if (!preset) {
      std::cerr << "unknown --preset (known: " << absl::StrJoin(ModelPresetNames(), ", ") << ")\n";
      return 2;
    }
    spec = *preset;
  }
  spec.arch = args->GetOr("arch", spec.arch);
  spec.name = args->GetOr("name", spec.name);
  spec.n_layers = static_cast<int>(args->GetInt("layers", spec.n_layers).value_or(spec.n_layers));
  spec.dim = static_cast<int>(args->GetInt("dim", spec.dim).value_or(spec.dim));
  spec.n_heads = static_cast<int>(args->GetInt("heads", spec.n_heads).value_or(spec.n_heads));
  spec.n_kv_heads = static_cast<int>(args->GetInt("kv-heads", spec.n_kv_heads).value_or(spec.n_kv_heads));
  spec.head_dim = static_cast<int>(args->GetInt("head-dim", spec.head_dim).value_or(spec.head_dim));
  spec.ffn_dim = static_cast<int>(args->GetInt("ffn", spec.ffn_dim).value_or(spec.ffn_dim));
  spec.vocab_size = static_cast<int>(args->GetInt("vocab", spec.vocab_size).value_or(spec.vocab_size));
  spec.context_length =
      static_cast<int>(args->GetInt("context", spec.context_length).value_or(spec.context_length));
  spec.rope_freq_base =
      static_cast<float>(args->GetDouble("rope-base", spec.rope_freq_base).value_or(spec.rope_freq_base));
  spec.seed = args->GetUint64("seed", spec.seed).value_or(spec.seed);
  spec.vocab_from = args->GetOr("vocab-from", spec.vocab_from);
  if (args->Has("tied")) spec.tied_embeddings = true;
  if (auto t = args->Get("type"); t && !ParseType(*t, &spec.weight_type)) {
    std::cerr << "--type must be one of f32 f16 bf16 q8_0 q4_0 q4_k q6_k\n";
    return 2;
  }
  absl::Status s = WriteSynthModel(spec, *args->Get("out"));
  if (!s.ok()) {
    std::cerr << "kvs-synth-model: " << s.message() << "\n";
    return 1;
  }
  std::cerr << "wrote " << *args->Get("out") << "\n";
  return 0;
}

}  // namespace
}  // namespace kvs

int main(int argc, char** argv) { return kvs::Main(argc, argv); }
