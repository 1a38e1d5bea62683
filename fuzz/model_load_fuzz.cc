// libFuzzer target: a model file of arbitrary bytes, loaded as kvsessiond
// loads one (model/model.h: GgufFile::Open, ModelConfig::FromGguf,
// ModelWeights::FromGguf, Tokenizer::FromGguf, the fast path's packing)
// and, when it loads, run: two tokens through the forward pass on both
// matmul paths.
//
// A GGUF comes from wherever its user downloaded it. Load promises that any
// file either fails with a status or yields a model whose shapes, types and
// metadata the forward pass can use as they are: a tensor of the wrong
// size, a head count that does not divide, a vocabulary shorter than the
// embeddings must be refused, never read out of bounds (ASan checks each
// read the pass makes: the scalar kernels run, since the fuzz build leaves
// the SIMD ones uninstrumented, cmake/sanitizers.cmake).
//
// Seeds (fuzz/corpus/model_load/): tiny llama and qwen3 models of F32,
// F16 and Q8_0 weights written by tools/model_synth.h (make_seed_corpus).
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cache/kv_sequence.h"
#include "cache/page_pool.h"
#include "kernels/cpu_features.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "model/transformer.h"

namespace {

// Load() takes a path, so each input goes through one scratch file per process.
std::string ScratchPath() {
  const char* tmp = getenv("TMPDIR");
  return std::string(tmp ? tmp : "/tmp") + "/kvs-model-fuzz-" + std::to_string(getpid()) + ".gguf";
}

// Larger models are refused before loading: the fuzzer's inputs are small,
// and a forward pass over a model built from them stays cheap.
constexpr int64_t kMaxFuzzedDim = 4096;

void RunTwoTokens(const kvs::Model& model, kvs::MatmulPath path) {
  const kvs::ModelConfig& c = model.config();
  if (c.dim > kMaxFuzzedDim || c.vocab_size > kMaxFuzzedDim * 16 || c.n_layers > 64) return;
  kvs::ThreadPool threads(1);
  const int context = std::min(c.context_length, 8);
  if (context < 2) return;
  kvs::Transformer transformer(c, model.weights(), &threads, /*max_batch_tokens=*/4, context, path);
  kvs::PagePool pages(transformer.kv_geometry(/*page_tokens=*/4, kvs::KvDtype::kF16), /*max_pages=*/4);
  kvs::KvSequence kv(&pages);
  const std::vector<int32_t> tokens = {0, c.vocab_size > 1 ? 1 : 0};
  kvs::ForwardItem item{&kv, tokens};
  std::vector<float> logits(static_cast<size_t>(c.vocab_size));
  if (!kv.PrepareAppend(static_cast<int>(tokens.size())).ok()) return;
  (void)transformer.Forward({&item, 1}, logits.data());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool scalar = kvs::ForceKernelIsa(kvs::KernelIsa::kScalar);
  (void)scalar;
  const std::string path = ScratchPath();
  FILE* f = fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  fwrite(data, 1, size, f);
  fclose(f);
  for (bool packed : {false, true}) {
    kvs::Model::Options options;
    options.pack_for_fast_path = packed;
    absl::StatusOr<std::unique_ptr<kvs::Model>> model = kvs::Model::Load(path, options);
    if (!model.ok()) break;
    RunTwoTokens(**model, packed ? kvs::MatmulPath::kFast : kvs::MatmulPath::kExact);
  }
  unlink(path.c_str());
  return 0;
}
