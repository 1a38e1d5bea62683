// Named model shapes for tools/model_synth: the published shapes of small
// models people serve, so a benchmark on a synthetic model measures the
// same work per token as the real one (random weights, same arithmetic).
//
// Each preset copies the model's published configuration (its Hugging Face
// config.json): layers, widths, heads, FFN, vocabulary size, context
// length, RoPE base and scaling, RMSNorm epsilon, tied embeddings. Weights
// are Q8_0. The vocabulary is a byte vocabulary padded to the model's size
// unless SynthSpec::vocab_from names a GGUF to copy it from (for example
// ../shared/vocab/ggml-vocab-llama3.gguf).
//
// Thread safety: the table is immutable; lookups may run concurrently.
#ifndef KVSESSION_TOOLS_MODEL_PRESETS_H_
#define KVSESSION_TOOLS_MODEL_PRESETS_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tools/model_synth.h"

namespace kvs {

// The spec of preset `name` ("qwen3-0.6b", "qwen2.5-0.5b", "llama3.2-1b"),
// or nullopt if there is no such preset.
std::optional<SynthSpec> FindModelPreset(std::string_view name);

// Every preset's name, in the order above.
std::vector<std::string> ModelPresetNames();

}  // namespace kvs

#endif  // KVSESSION_TOOLS_MODEL_PRESETS_H_
