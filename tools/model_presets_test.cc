// Model presets (tools/model_presets.h): each one writes a GGUF that the
// engine loads with the shape its model publishes in config.json. The
// expected figures below are copied from those config.json files, not
// from the preset table.
#include "tools/model_presets.h"

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "tests/scratch_dir.h"

namespace kvs {
namespace {

// A published configuration (Hugging Face config.json of the named model).
struct PublishedShape {
  const char* preset;
  const char* arch;
  int layers, hidden, heads, kv_heads, head_dim, intermediate, vocab, max_positions;
  double rope_theta, rms_eps;
};

constexpr PublishedShape kPublished[] = {
    // Qwen/Qwen3-0.6B
    {"qwen3-0.6b", "qwen3", 28, 1024, 16, 8, 128, 3072, 151936, 40960, 1e6, 1e-6},
    // Qwen/Qwen2.5-0.5B
    {"qwen2.5-0.5b", "qwen2", 24, 896, 14, 2, 64, 4864, 151936, 32768, 1e6, 1e-6},
    // meta-llama/Llama-3.2-1B
    {"llama3.2-1b", "llama", 16, 2048, 32, 8, 64, 8192, 128256, 131072, 500000, 1e-5},
};

class ModelPresetTest : public ::testing::Test {
 protected:
  // Writes `spec` cut to one layer, a 512-token byte vocabulary and Q4_0
  // weights (every other dimension as the preset has it), and loads it.
  void WriteOneLayerAndLoad(SynthSpec spec, ModelConfig* config, std::unique_ptr<ModelWeights>* weights) {
    spec.n_layers = 1;
    spec.vocab_size = 512;
    spec.weight_type = GgmlType::kQ4_0;
    const std::string path = (dir_ / "m.gguf").string();
    ASSERT_TRUE(WriteSynthModel(spec, path).ok());
    auto gguf = GgufFile::Open(path);
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    auto c = ModelConfig::FromGguf(**gguf);
    ASSERT_TRUE(c.ok()) << c.status();
    auto w = ModelWeights::FromGguf(**gguf, *c);
    ASSERT_TRUE(w.ok()) << w.status();
    *config = *c;
    *weights = std::move(*w);
    file_ = std::move(*gguf);
  }

  // The RoPE frequencies (per rotated pair) of preset `name`, as loaded.
  std::vector<float> RotationFrequenciesOf(std::string_view name) {
    std::optional<SynthSpec> spec = FindModelPreset(name);
    EXPECT_TRUE(spec.has_value());
    if (!spec) return {};
    spec->ffn_dim = 256;  // the rotation depends on the heads only
    ModelConfig c;
    std::unique_ptr<ModelWeights> w;
    WriteOneLayerAndLoad(*spec, &c, &w);
    return w ? w->rope_inv_freq : std::vector<float>{};
  }

  ScratchDir scratch_{"model_presets"};
  const std::filesystem::path dir_ = scratch_.path();
  std::unique_ptr<GgufFile> file_;
};

TEST_F(ModelPresetTest, EveryPresetLoadsWithItsModelsPublishedShape) {
  ASSERT_EQ(ModelPresetNames().size(), std::size(kPublished));
  for (const PublishedShape& want : kPublished) {
    SCOPED_TRACE(want.preset);
    std::optional<SynthSpec> spec = FindModelPreset(want.preset);
    ASSERT_TRUE(spec.has_value());
    EXPECT_EQ(spec->n_layers, want.layers);
    EXPECT_EQ(spec->vocab_size, want.vocab);
    EXPECT_EQ(spec->weight_type, GgmlType::kQ8_0);
    EXPECT_TRUE(spec->tied_embeddings);

    ModelConfig c;
    std::unique_ptr<ModelWeights> w;
    ASSERT_NO_FATAL_FAILURE(WriteOneLayerAndLoad(*spec, &c, &w));
    EXPECT_EQ(c.arch_name, want.arch);
    EXPECT_EQ(c.dim, want.hidden);
    EXPECT_EQ(c.n_heads, want.heads);
    EXPECT_EQ(c.n_kv_heads, want.kv_heads);
    EXPECT_EQ(c.head_dim, want.head_dim);
    EXPECT_EQ(c.rope_dim, want.head_dim);
    EXPECT_EQ(c.ffn_dim, want.intermediate);
    EXPECT_EQ(c.context_length, want.max_positions);
    EXPECT_FLOAT_EQ(c.rope_freq_base, static_cast<float>(want.rope_theta));
    EXPECT_FLOAT_EQ(c.rms_eps, static_cast<float>(want.rms_eps));
    EXPECT_TRUE(w->tied_embeddings);
  }
}

// Llama 3's RoPE scaling (factor 32, low_freq_factor 1, high_freq_factor 4,
// original context 8,192): pairs of wavelength under 8,192 / 4 = 2,048
// positions keep base^(-2i/64); pairs over 8,192 turn exactly 32 times
// slower; the three pairs between (i = 15, 16, 17 with base 500,000) blend,
// slowing more as the wavelength grows.
TEST_F(ModelPresetTest, Llama3PresetSlowsOnlyItsLongWavelengthRotations) {
  const std::vector<float> inv_freq = RotationFrequenciesOf("llama3.2-1b");
  ASSERT_EQ(inv_freq.size(), 32u);
  double last_slowdown = 1.0;
  int blended = 0;
  for (int i = 0; i < 32; ++i) {
    SCOPED_TRACE(i);
    const double unscaled = std::pow(500000.0, -2.0 * i / 64);
    const double wavelength = 2 * M_PI / unscaled;
    const double slowdown = unscaled / inv_freq[i];
    if (wavelength < 2048) {
      EXPECT_NEAR(slowdown, 1.0, 1e-5);
    } else if (wavelength > 8192) {
      EXPECT_NEAR(slowdown, 32.0, 32e-5);
    } else {
      EXPECT_GT(slowdown, last_slowdown);
      EXPECT_LT(slowdown, 32.0);
      ++blended;
    }
    EXPECT_GE(slowdown, last_slowdown - 1e-5);
    last_slowdown = slowdown;
  }
  EXPECT_EQ(blended, 3);
}

TEST_F(ModelPresetTest, PresetsWithoutRopeScalingRotateAtTheUnscaledFrequencies) {
  for (const char* name : {"qwen3-0.6b", "qwen2.5-0.5b"}) {
    SCOPED_TRACE(name);
    const std::vector<float> inv_freq = RotationFrequenciesOf(name);
    ASSERT_FALSE(inv_freq.empty());
    const int rope_dim = static_cast<int>(inv_freq.size()) * 2;
    for (int i = 0; i < rope_dim / 2; ++i) {
      const double unscaled = std::pow(1e6, -2.0 * i / rope_dim);  // both have rope_theta 1e6
      EXPECT_NEAR(inv_freq[i], unscaled, 1e-6 * unscaled);
    }
  }
}

TEST_F(ModelPresetTest, AnUnknownNameIsNoPreset) {
  EXPECT_FALSE(FindModelPreset("qwen3-0.6B").has_value());  // names are exact
  EXPECT_FALSE(FindModelPreset("").has_value());
}

}  // namespace
}  // namespace kvs
