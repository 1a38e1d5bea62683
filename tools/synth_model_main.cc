// kvs-synth-model: writes a GGUF model of any llama / qwen2 / qwen3 shape
// and weight type with random weights (tools/model_synth.h), loadable by
// kvsession and by llama.cpp (same metadata keys and tensor names).
//
//   kvs-synth-model --out M.gguf [--preset qwen3-0.6b] [--arch qwen3]
//       [--layers 28 --dim 1024 --heads 16 --kv-heads 8 --head-dim 128
//        --ffn 3072 --vocab 151936 --context 40960 --type q8_0 --tied]
//       [--vocab-from ../shared/vocab/ggml-vocab-gpt-2.gguf] [--seed 1]
//
// --preset qwen3-0.6b gives the Qwen3-0.6B shape used by the benchmarks:
// 28 layers, dim 1024, 16 heads, 8 KV heads, head_dim 128, ffn 3072, tied
// embeddings, Q8_0, vocabulary 151936, rope base 1e6.
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "client/cli_args.h"
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
    std::cerr << "usage: kvs-synth-model --out M.gguf [--preset qwen3-0.6b] [--arch A --layers N "
                 "--dim D --heads H --kv-heads K --head-dim HD --ffn F --vocab V --context C "
                 "--type q8_0 --tied --vocab-from V.gguf --seed S]\n";
    if (!args.ok()) std::cerr << args.status().message() << "\n";
    return 2;
  }
  SynthSpec spec;
  if (args->GetOr("preset", "") == "qwen3-0.6b") {
    spec.arch = "qwen3";
    spec.name = "synthetic-qwen3-0.6b";
    spec.n_layers = 28;
    spec.dim = 1024;
    spec.n_heads = 16;
    spec.n_kv_heads = 8;
    spec.head_dim = 128;
    spec.ffn_dim = 3072;
    spec.vocab_size = 151936;
    spec.context_length = 40960;
    spec.rope_freq_base = 1e6f;
    spec.weight_type = GgmlType::kQ8_0;
    spec.tied_embeddings = true;
  } else if (args->Has("preset")) {
    std::cerr << "unknown --preset (known: qwen3-0.6b)\n";
    return 2;
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
  spec.rope_freq_base = static_cast<float>(args->GetDouble("rope-base", spec.rope_freq_base).value_or(spec.rope_freq_base));
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
