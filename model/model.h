// Model: everything loaded from one GGUF file, ready to run: the mapping,
// the config, typed weight views and the tokenizer.
//
// Ownership: owns the GgufFile; the weights borrow its mapping, so they live
// and die together here. Immutable after Load and safe to share between
// threads (the mutable forward-pass workspace lives in a Transformer).
#ifndef KVSESSION_MODEL_MODEL_H_
#define KVSESSION_MODEL_MODEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/tokenizer.h"

namespace kvs {

class Model {
 public:
  // Errors: NotFound (no file), InvalidArgument (malformed GGUF, unsupported
  // architecture or tensor type, bad tokenizer metadata; the message names
  // the file and the problem).
  struct Options {
    // Re-lay out Q8_0 weights for the fast matmul path (kernels/packed_q8_0.h).
    bool pack_for_fast_path = true;
  };
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& path);
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& path, const Options& options);

  const GgufFile& gguf() const { return *gguf_; }
  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return *weights_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  double load_ms() const { return load_ms_; }

  // Number of weights and the most common matrix type ("Q8_0", ...).
  int64_t parameter_count() const { return parameters_; }
  std::string weight_type_name() const { return weight_type_; }
  // One line for logs: name, architecture, size, weight type, load time.
  std::string Summary() const;

 private:
  Model() = default;

  std::unique_ptr<GgufFile> gguf_;
  ModelConfig config_;
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  double load_ms_ = 0;
  int64_t parameters_ = 0;
  std::string weight_type_;
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_MODEL_H_
