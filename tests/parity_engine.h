// Test helper: a model loaded in-process with its own thread pool, KV
// page pool and transformer, fed token spans the way the engine feeds them
// (PrepareAppend, then Forward). Used by the parity and KV-type precision
// tests; failures are reported through gtest (EXPECT), never thrown.
#ifndef KVSESSION_TESTS_PARITY_ENGINE_H_
#define KVSESSION_TESTS_PARITY_ENGINE_H_

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cache/kv_sequence.h"
#include "cache/page_pool.h"
#include "gtest/gtest.h"
#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/thread_pool.h"
#include "model/transformer.h"

namespace kvs {

// A loaded model with its own thread pool, KV pool and transformer.
struct TestEngine {
  std::unique_ptr<GgufFile> gguf;
  ModelConfig config;
  std::unique_ptr<ModelWeights> weights;
  std::unique_ptr<ThreadPool> threads;
  std::unique_ptr<Transformer> transformer;
  std::unique_ptr<PagePool> pages;

  static std::unique_ptr<TestEngine> Load(const std::string& path, KvDtype dtype, MatmulPath matmul,
                                      int page_tokens = 16) {
    auto e = std::make_unique<TestEngine>();
    auto gguf = GgufFile::Open(path);
    EXPECT_TRUE(gguf.ok()) << gguf.status();
    if (!gguf.ok()) return nullptr;
    e->gguf = std::move(*gguf);
    auto config = ModelConfig::FromGguf(*e->gguf);
    EXPECT_TRUE(config.ok()) << config.status();
    if (!config.ok()) return nullptr;
    e->config = *config;
    auto weights = ModelWeights::FromGguf(*e->gguf, e->config);
    EXPECT_TRUE(weights.ok()) << weights.status();
    if (!weights.ok()) return nullptr;
    e->weights = std::move(*weights);
    if (matmul == MatmulPath::kFast) e->weights->PackForFastPath();
    e->threads = std::make_unique<ThreadPool>(2);
    e->transformer = std::make_unique<Transformer>(e->config, *e->weights, e->threads.get(), 512,
                                                   e->config.context_length, matmul);
    e->pages = std::make_unique<PagePool>(e->transformer->kv_geometry(page_tokens, dtype), 4096);
    return e;
  }

  int vocab() const { return config.vocab_size; }

  // Appends `tokens` to `kv` in chunks of `chunk` and returns the logits of
  // the last token.
  std::vector<float> Feed(KvSequence& kv, std::span<const int32_t> tokens, size_t chunk = 512) {
    std::vector<float> logits(vocab());
    for (size_t i = 0; i < tokens.size(); i += chunk) {
      ForwardItem item{&kv, tokens.subspan(i, std::min(chunk, tokens.size() - i))};
      absl::Status s = kv.PrepareAppend(static_cast<int>(item.tokens.size()));
      if (s.ok()) s = transformer->Forward({&item, 1}, logits.data());
      EXPECT_TRUE(s.ok()) << s;
    }
    return logits;
  }
};

}  // namespace kvs

#endif  // KVSESSION_TESTS_PARITY_ENGINE_H_
