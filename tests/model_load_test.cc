// Loading models: every supported architecture and layout (synthesized with
// tools/model_synth), and clear errors for broken or unsupported files.
#include <filesystem>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <vector>

#include "cache/kv_sequence.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/packed_q8_0.h"
#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/thread_pool.h"
#include "model/transformer.h"
#include "tests/scratch_dir.h"
#include "tools/model_synth.h"

namespace kvs {
namespace {

using ::testing::HasSubstr;

class ModelLoadTest : public ::testing::Test {
 protected:
  std::string Synth(const SynthSpec& spec, const std::string& name) {
    std::string path = (dir_ / name).string();
    absl::Status s = WriteSynthModel(spec, path);
    EXPECT_TRUE(s.ok()) << s;
    return path;
  }

  // Loads config + weights (which borrow the mapping kept in file_);
  // returns the first error.
  absl::Status Load(const std::string& path, ModelConfig* config = nullptr,
                    std::unique_ptr<ModelWeights>* weights = nullptr) {
    auto gguf = GgufFile::Open(path);
    if (!gguf.ok()) return gguf.status();
    auto c = ModelConfig::FromGguf(**gguf);
    if (!c.ok()) return c.status();
    auto w = ModelWeights::FromGguf(**gguf, *c);
    if (!w.ok()) return w.status();
    if (config) *config = *c;
    if (weights) *weights = std::move(*w);
    file_ = std::move(*gguf);
    return absl::OkStatus();
  }

  // Overwrites the u32 at `offset_after_name` bytes past tensor `name`'s name.
  void PatchAfterName(const std::string& path, const std::string& name, size_t offset_after_name,
                      const void* bytes, size_t n) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    size_t pos = data.find(name);
    ASSERT_NE(pos, std::string::npos);
    f.seekp(pos + name.size() + offset_after_name);
    f.write(static_cast<const char*>(bytes), n);
  }

  ScratchDir scratch_{"model_load"};
  const std::filesystem::path dir_ = scratch_.path();
  std::unique_ptr<GgufFile> file_;
};

// Runs a 5-token prefill and one decode step; logits must be finite.
void ExpectRuns(const ModelConfig& c, const ModelWeights& w) {
  ThreadPool threads(2);
  Transformer t(c, w, &threads, 64, c.context_length);
  PagePool pool(t.kv_geometry(16, KvDtype::kF16), 64);
  KvSequence kv(&pool);
  std::vector<int32_t> prompt = {1, 5, 9, 13, 17};
  std::vector<float> logits(c.vocab_size);
  ForwardItem item{&kv, prompt};
  ASSERT_TRUE(kv.PrepareAppend(static_cast<int>(prompt.size())).ok());
  ASSERT_TRUE(t.Forward({&item, 1}, logits.data()).ok());
  int32_t next = 3;
  item = {&kv, {&next, 1}};
  ASSERT_TRUE(kv.PrepareAppend(1).ok());
  ASSERT_TRUE(t.Forward({&item, 1}, logits.data()).ok());
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(kv.length(), 6);
}

TEST_F(ModelLoadTest, EveryArchitectureAndWeightTypeLoadsAndRuns) {
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                          GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
      SynthSpec spec;
      spec.arch = arch;
      spec.dim = 256;
      spec.n_heads = 4;
      spec.n_kv_heads = 2;
      spec.head_dim = 128;  // heads x head_dim != dim
      spec.ffn_dim = 512;
      spec.weight_type = type;
      ModelConfig c;
      std::unique_ptr<ModelWeights> w;
      SCOPED_TRACE(std::string(arch) + " " + GgmlTypeName(static_cast<uint32_t>(type)));
      absl::Status loaded = Load(Synth(spec, "m.gguf"), &c, &w);
      ASSERT_TRUE(loaded.ok()) << loaded;
      EXPECT_EQ(c.head_dim, 128);
      EXPECT_EQ(c.q_dim(), 512);
      EXPECT_EQ(c.qkv_bias, std::string(arch) == "qwen2");
      EXPECT_EQ(c.qk_norm, std::string(arch) == "qwen3");
      EXPECT_EQ(c.rope_style, std::string(arch) == "llama" ? RopeStyle::kAdjacent : RopeStyle::kNeox);
      ExpectRuns(c, *w);
    }
  }
}

TEST_F(ModelLoadTest, TiedEmbeddingsReuseTokenEmbd) {
  SynthSpec spec;
  spec.tied_embeddings = true;
  ModelConfig c;
  std::unique_ptr<ModelWeights> w;
  ASSERT_TRUE(Load(Synth(spec, "tied.gguf"), &c, &w).ok());
  EXPECT_TRUE(w->tied_embeddings);
  EXPECT_EQ(w->output.data, w->token_embd.data);
  ExpectRuns(c, *w);
}

// The fast path's packed matrices are one stream in the order a forward
// pass reads them (layer by layer: q, k, v, o, gate, up, down; then the
// output matrix), starting on a huge-page boundary, and the model still runs.
TEST_F(ModelLoadTest, PackedWeightsLieInOneRangeInTheOrderAForwardPassReadsThem) {
  if (!PackedQ8_0Supported()) GTEST_SKIP() << "this CPU has no packed Q8_0 kernels";
  SynthSpec spec;
  spec.arch = "qwen3";
  spec.n_layers = 3;
  spec.weight_type = GgmlType::kQ8_0;
  ModelConfig c;
  std::unique_ptr<ModelWeights> w;
  ASSERT_TRUE(Load(Synth(spec, "q8.gguf"), &c, &w).ok());
  const int64_t packed = w->PackForFastPath();
  std::vector<const WeightMatrix*> order;
  for (const LayerWeights& L : w->layers) {
    for (const WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) order.push_back(m);
  }
  order.push_back(&w->output);
  ASSERT_NE(order.front()->packed, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(order.front()->packed) % (2 << 20), 0u);
  int64_t sum = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const int64_t bytes = (PackedQ8_0Bytes(order[i]->rows, order[i]->cols) + 63) / 64 * 64;
    sum += bytes;
    if (i + 1 < order.size()) {
      ASSERT_EQ(order[i + 1]->packed, order[i]->packed + bytes) << "matrix " << i;
    }
  }
  EXPECT_EQ(packed, sum);
  EXPECT_EQ(w->PackForFastPath(), 0);  // already packed
  ExpectRuns(c, *w);
}

// Packing runs on several threads, in runs of groups (256 groups of 16
// rows each; the 5,000-row output matrix is two runs, its last group
// partial): every matrix holds the bytes PackQ8_0 gives it on one thread.
TEST_F(ModelLoadTest, PackedWeightsAreTheBytesOfPackingEachMatrixAloneOnOneThread) {
  if (!PackedQ8_0Supported()) GTEST_SKIP() << "this CPU has no packed Q8_0 kernels";
  SynthSpec spec;
  spec.arch = "qwen3";
  spec.n_layers = 2;
  spec.vocab_size = 5000;
  spec.weight_type = GgmlType::kQ8_0;
  ModelConfig c;
  std::unique_ptr<ModelWeights> w;
  ASSERT_TRUE(Load(Synth(spec, "q8-threads.gguf"), &c, &w).ok());
  ASSERT_GT(w->PackForFastPath(), 0);
  std::vector<const WeightMatrix*> matrices = {&w->output};
  for (const LayerWeights& L : w->layers) {
    for (const WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) matrices.push_back(m);
  }
  ASSERT_EQ(w->output.rows, 5000);
  for (size_t i = 0; i < matrices.size(); ++i) {
    const WeightMatrix& m = *matrices[i];
    // The GGUF rows come back from the file after the load let them go.
    std::vector<uint8_t> alone(PackedQ8_0Bytes(m.rows, m.cols));
    PackQ8_0(m.data, m.row_bytes, m.rows, m.cols, alone.data());
    ASSERT_NE(m.packed, nullptr) << "matrix " << i;
    EXPECT_EQ(std::memcmp(m.packed, alone.data(), alone.size()), 0) << "matrix " << i;
  }
}

TEST_F(ModelLoadTest, UnknownArchitectureIsAClearError) {
  SynthSpec spec;
  std::string path = Synth(spec, "arch.gguf");
  // "llama" -> "mamba" in general.architecture (same length).
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t pos = data.find("llama", data.find("general.architecture"));
  f.seekp(pos);
  f.write("mamba", 5);
  f.close();
  absl::Status s = Load(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("unsupported architecture 'mamba'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("arch.gguf"));
}

TEST_F(ModelLoadTest, UnsupportedTensorTypeIsAClearError) {
  SynthSpec spec;
  spec.dim = 256;
  spec.n_heads = 4;
  spec.n_kv_heads = 4;
  std::string path = Synth(spec, "type.gguf");
  const uint32_t q5_k = 13;  // smaller than F32 rows, so the file stays valid GGUF
  PatchAfterName(path, "blk.1.attn_q.weight", 4 + 8 * 2, &q5_k, 4);
  absl::Status s = Load(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("'blk.1.attn_q.weight' has type Q5_K"));
}

TEST_F(ModelLoadTest, WrongShapeAndMissingTensorAreClearErrors) {
  SynthSpec spec;
  std::string path = Synth(spec, "shape.gguf");
  const uint64_t rows = 32;  // attn_k is [64, 64]; make it [64, 32]
  PatchAfterName(path, "blk.0.attn_k.weight", 4 + 8, &rows, 8);
  absl::Status s = Load(path);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'blk.0.attn_k.weight' has shape [64, 32], expected [64, 64]"));

  path = Synth(spec, "missing.gguf");
  PatchAfterName(path, "blk.1.ffn_up.weigh", 0, "X", 1);  // blk.1.ffn_up.weighX
  s = Load(path);
  EXPECT_THAT(std::string(s.message()), HasSubstr("tensor 'blk.1.ffn_up.weight' is missing"));
}

// Replaces every `from` in the file with `to` (the same length).
void ReplaceAll(const std::string& path, const std::string& from, const std::string& to) {
  ASSERT_EQ(from.size(), to.size());
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (size_t pos = data.find(from); pos != std::string::npos; pos = data.find(from, pos + 1)) {
    data.replace(pos, from.size(), to);
  }
  f.seekp(0);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

// A llama model may carry Q/K/V biases and Q/K norms (honoured when
// present), but the forward pass applies each set together: a file with
// only some of one set is refused at load, not run with a missing one.
TEST_F(ModelLoadTest, SomeButNotAllOfTheQkvBiasesOrQkNormsIsAClearError) {
  SynthSpec spec;
  spec.arch = "qwen2";  // writes all three biases
  std::string path = Synth(spec, "bias.gguf");
  ReplaceAll(path, "qwen2", "llama");  // the same file as a llama model
  ASSERT_TRUE(Load(path).ok());
  PatchAfterName(path, "blk.0.attn_k.bia", 0, "X", 1);  // blk.0.attn_k.biaX: no K bias
  absl::Status s = Load(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("block 0 has some of attn_q.bias, attn_k.bias and attn_v.bias"));

  spec.arch = "qwen3";  // writes both norms
  path = Synth(spec, "norm.gguf");
  ReplaceAll(path, "qwen3", "llama");
  ASSERT_TRUE(Load(path).ok());
  PatchAfterName(path, "blk.1.attn_k_norm.weigh", 0, "X", 1);
  s = Load(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("block 1 has one of attn_q_norm and attn_k_norm"));
}

// A tensor the forward pass would not read (a Llama's attn_output or ffn
// biases, which it has no place for) would leave the file's model computed
// without it: refused, naming the tensor, as llama.cpp refuses a file with
// tensors it does not load.
TEST_F(ModelLoadTest, ATensorTheForwardPassWouldNotUseIsAClearError) {
  SynthSpec spec;
  spec.arch = "qwen3";  // writes both Q/K norms
  std::string path = Synth(spec, "unused.gguf");
  ReplaceAll(path, "qwen3", "llama");
  ASSERT_TRUE(Load(path).ok());
  // Block 1's norms renamed: the block has neither (allowed), and the file
  // two tensors nothing reads.
  PatchAfterName(path, "blk.1.attn_q_nor", 0, "X", 1);
  PatchAfterName(path, "blk.1.attn_k_nor", 0, "X", 1);
  absl::Status s = Load(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("_norX.weight' is not used by kvsession's forward pass"));
}

// Linear RoPE scaling as llama.cpp reads it: the type is linear unless the
// file says otherwise, the factor may be under the older rope.scale_linear
// key, and type none never scales. Non-finite values are refused.
TEST_F(ModelLoadTest, LinearRopeScalingIsReadAsLlamaCppReadsItAndNonFiniteValuesAreRefused) {
  struct Case {
    std::string type;
    float factor;
    bool old_key;
    float scale;  // the position scale the forward pass uses
  };
  const Case cases[] = {{"", 4, false, 0.25f},      {"", 4, true, 0.25f},  {"linear", 4, false, 0.25f},
                        {"none", 4, false, 1.0f},   {"", 0, false, 1.0f},  {"linear", 2, true, 0.5f}};
  for (const Case& k : cases) {
    SynthSpec spec;
    spec.rope_scaling_type = k.type;
    spec.rope_scaling_factor = k.factor;
    spec.rope_scale_linear_key = k.old_key;
    ModelConfig c;
    ASSERT_TRUE(Load(Synth(spec, "scaled.gguf"), &c).ok());
    EXPECT_EQ(c.rope_scale, k.scale) << "type '" << k.type << "' factor " << k.factor
                                     << (k.old_key ? " (scale_linear)" : "");
  }
  SynthSpec spec;
  spec.rope_scaling_factor = std::numeric_limits<float>::infinity();
  absl::Status s = Load(Synth(spec, "inf_factor.gguf"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  spec = SynthSpec();
  spec.rope_freq_base = std::numeric_limits<float>::infinity();
  s = Load(Synth(spec, "inf_base.gguf"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("must be finite"));
}

// Metadata sizes the model: each value is in range, but what they size
// must be too, before anything is allocated by them.
TEST_F(ModelLoadTest, ABlockCountPastTheFilesBlocksOrHeadsTooWideForTheProjectionsIsAClearError) {
  SynthSpec spec;
  std::string path = Synth(spec, "blocks.gguf");
  const uint32_t blocks = uint32_t{1} << 29;
  PatchAfterName(path, "llama.block_count", 4, &blocks, 4);
  absl::Status s = Load(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("tensor 'blk.536870911.attn_norm.weight' is missing (block_count 536870912)"));

  path = Synth(spec, "heads.gguf");
  const uint32_t heads = uint32_t{1} << 28;  // x 16 values: 2^32, an int's range passed
  PatchAfterName(path, "llama.attention.head_count", 4, &heads, 4);
  PatchAfterName(path, "llama.attention.head_count_kv", 4, &heads, 4);
  s = Load(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("head_count 268435456 x key_length 16 is more than 1048576"));
}

TEST_F(ModelLoadTest, TruncatedModelNamesTheFile) {
  SynthSpec spec;
  std::string path = Synth(spec, "trunc.gguf");
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100);
  absl::Status s = Load(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("trunc.gguf"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("past the end"));
}

}  // namespace
}  // namespace kvs
