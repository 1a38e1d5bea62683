// Sessions decoding together on a model whose matrices MatmulGroup cuts
// differently for a batch (EvenOutSpans, model/matmul_task_rows.h) still
// get the bits each gets alone: which task computes a row never changes
// the row. The model is synthesized (tools/model_synth) with 512-row
// output and down projections, which tasks of 192 rows would leave uneven.
#include <cstdint>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/matmul.h"
#include "kernels/packed_q8_0.h"
#include "model/matmul_task_rows.h"
#include "tests/parity_engine.h"
#include "tests/scratch_dir.h"
#include "tools/model_synth.h"

namespace kvs {
namespace {

TEST(MatmulSpansTest, SessionsDecodingTogetherOnEvenedOutCutsGetTheBitsEachGetsAlone) {
  if (!PackedQ8_0Supported()) GTEST_SKIP() << "this CPU has no packed Q8_0 kernels";
  ScratchDir dir("matmul_spans");
  SynthSpec spec;
  spec.arch = "qwen3";
  spec.n_layers = 2;
  spec.dim = 512;
  spec.n_heads = 8;
  spec.n_kv_heads = 4;
  spec.ffn_dim = 1024;
  spec.vocab_size = 1000;
  spec.weight_type = GgmlType::kQ8_0;
  const std::string path = dir.file("q8.gguf");
  ASSERT_TRUE(WriteSynthModel(spec, path).ok());
  std::unique_ptr<TestEngine> engine = TestEngine::Load(path, KvDtype::kF16, MatmulPath::kFast);
  ASSERT_NE(engine, nullptr);

  constexpr int kSessions = 8;
  // The premise: this CPU's kernel cuts the batch's output projection
  // unevenly, so EvenOutSpans changes it (on AVX2 every cut is even).
  const WeightMatrix& wo = engine->weights->layers[0].wo;
  ASSERT_EQ(wo.rows, 512);
  std::vector<int64_t> chunk = {MatmulMinCallRows(wo, kSessions)};
  const int64_t proposed = chunk[0];
  EvenOutSpans(2, std::vector<int64_t>{wo.rows}, chunk);
  if (chunk[0] == proposed) GTEST_SKIP() << "this CPU's kernels cut a 512-row matrix evenly already";

  std::vector<KvSequence> batched, alone;
  for (int s = 0; s < kSessions; ++s) {
    std::vector<int32_t> prompt;
    for (int t = 0; t < 5 + 3 * s; ++t) prompt.push_back((s * 31 + t * 7 + 1) % engine->vocab());
    batched.emplace_back(engine->pages.get());
    alone.emplace_back(engine->pages.get());
    engine->Feed(batched.back(), prompt);
    engine->Feed(alone.back(), prompt);
  }
  for (int step = 0; step < 3; ++step) {
    std::vector<int32_t> next(kSessions);
    std::vector<ForwardItem> items;
    for (int s = 0; s < kSessions; ++s) {
      next[s] = (step * 11 + s * 5 + 2) % engine->vocab();
      items.push_back({&batched[s], {&next[s], 1}});
      ASSERT_TRUE(batched[s].PrepareAppend(1).ok());
    }
    std::vector<float> logits(kSessions * static_cast<size_t>(engine->vocab()));
    ASSERT_TRUE(engine->transformer->Forward(items, logits.data()).ok());
    for (int s = 0; s < kSessions; ++s) {
      const std::vector<float> own = engine->Feed(alone[s], {&next[s], 1});
      const std::vector<float> row(logits.begin() + s * engine->vocab(), logits.begin() + (s + 1) * engine->vocab());
      EXPECT_EQ(row, own) << "session " << s << " step " << step;
    }
  }
}

}  // namespace
}  // namespace kvs
