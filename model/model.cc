#include "model/model.h"

#include <chrono>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kvs {

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path) {
  return Load(path, Options());
}

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path, const Options& options) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Model> m(new Model());
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(path);
  if (!gguf.ok()) return gguf.status();
  m->gguf_ = std::move(*gguf);
  absl::StatusOr<ModelConfig> config = ModelConfig::FromGguf(*m->gguf_);
  if (!config.ok()) return config.status();
  m->config_ = *config;
  absl::StatusOr<std::unique_ptr<ModelWeights>> weights = ModelWeights::FromGguf(*m->gguf_, m->config_);
  if (!weights.ok()) return weights.status();
  m->weights_ = std::move(*weights);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf(*m->gguf_);
  if (!tokenizer.ok()) return tokenizer.status();
  m->tokenizer_ = std::move(*tokenizer);
  if (m->tokenizer_->vocab_size() != m->config_.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": the vocabulary has ", m->tokenizer_->vocab_size(),
        " tokens but token_embd.weight has ", m->config_.vocab_size, " rows"));
  }

  std::map<std::string, int64_t> bytes_by_type;
  for (const GgufTensor& t : m->gguf_->tensors()) {
    m->parameters_ += static_cast<int64_t>(t.n_elements);
    if (t.n_dims == 2) bytes_by_type[GgmlTypeName(t.type)] += static_cast<int64_t>(t.n_bytes);
  }
  int64_t best = -1;
  for (const auto& [name, bytes] : bytes_by_type) {
    if (bytes > best) {
      best = bytes;
      m->weight_type_ = name;
    }
  }
  if (options.pack_for_fast_path) m->weights_->PackForFastPath();
  m->load_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return m;
}

std::string Model::Summary() const {
  const double params = static_cast<double>(parameters_);
  std::string size = params >= 1e9   ? absl::StrFormat("%.2fB", params / 1e9)
                     : params >= 1e6 ? absl::StrFormat("%.1fM", params / 1e6)
                                     : absl::StrFormat("%.0fK", params / 1e3);
  return absl::StrFormat("loaded %s: %s, %s params, %d layers, %s, %.1f MiB, context %d, in %.0f ms",
                         config_.name, config_.arch_name, size, config_.n_layers, weight_type_,
                         static_cast<double>(gguf_->file_size()) / (1 << 20), config_.context_length,
                         load_ms_);
}

}  // namespace kvs
