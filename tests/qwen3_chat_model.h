// A small random qwen3 model with the real Qwen3 vocabulary and chat
// template (../shared/vocab/ggml-vocab-qwen3.gguf), for chat tests over the
// real kvsessiond, and the Qwen3 token ids they name.
//
// WriteQwen3ChatModel writes it to a temporary file. Returns the path, or ""
// when ../shared has no Qwen3 vocabulary (the suite then skips) or writing
// failed (reported as a test failure). Qwen3ChatFixture does it once per
// test suite and removes the file after the suite.
#ifndef KVSESSION_TESTS_QWEN3_CHAT_MODEL_H_
#define KVSESSION_TESTS_QWEN3_CHAT_MODEL_H_

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "tests/service_fixture.h"
#include "tools/model_synth.h"

namespace kvs {

inline constexpr int32_t kQwen3ImStart = 151644;
inline constexpr int32_t kQwen3ImEnd = 151645;
inline constexpr int32_t kQwen3EndOfText = 151643;
inline constexpr int32_t kQwen3Newline = 198;

// `tag` names the file (one per test binary and process).
inline std::string WriteQwen3ChatModel(const std::string& tag) {
  const std::string vocab = SharedDir() + "/vocab/ggml-vocab-qwen3.gguf";
  if (!std::filesystem::exists(vocab)) return "";
  const std::string path =
      (std::filesystem::temp_directory_path() / (tag + "_" + std::to_string(::getpid()) + ".gguf")).string();
  SynthSpec spec;
  spec.arch = "qwen3";
  spec.name = "qwen3-vocab-synth";
  spec.n_layers = 2;
  spec.dim = 64;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.head_dim = 16;
  spec.ffn_dim = 128;
  spec.vocab_size = 151936;
  spec.context_length = 1024;
  spec.tied_embeddings = true;
  spec.weight_type = GgmlType::kF16;
  spec.vocab_from = vocab;
  if (const absl::Status st = WriteSynthModel(spec, path); !st.ok()) {
    ADD_FAILURE() << st;
    return "";
  }
  return path;
}

// A ServiceFixture whose suite shares one Qwen3 chat model (model_path_,
// written in SetUpTestSuite, removed in TearDownTestSuite). Each test skips
// when ../shared is absent or has no Qwen3 vocabulary; a derived SetUp calls
// this one first and returns if IsSkipped().
class Qwen3ChatFixture : public ServiceFixture {
 protected:
  static void SetUpTestSuite() { model_path_ = WriteQwen3ChatModel("qwen3_chat_model"); }
  static void TearDownTestSuite() {
    if (!model_path_.empty()) std::filesystem::remove(model_path_);
    model_path_.clear();
  }

  void SetUp() override {
    ServiceFixture::SetUp();
    if (IsSkipped()) return;
    if (model_path_.empty()) GTEST_SKIP() << "no Qwen3 vocabulary in ../shared";
  }

  static inline std::string model_path_;
};

}  // namespace kvs

#endif  // KVSESSION_TESTS_QWEN3_CHAT_MODEL_H_
