// The quantized KV caches (--kv-type q8_0 and bf16) against the f16 cache:
// teacher-forced logits move by no more than llama.cpp's own logits move
// when its cache goes from f16 to q8_0 (or bf16), on the same models and
// token sequences; and the quantized caches keep the determinism contract
// (one prefill == chunked prefill == token-by-token decode, bit for bit).
//
// llama.cpp's figures (kLlamaCpp below) were measured on the reference
// models with llama.cpp build 4748 (c392e5094), CPU, 2 threads, flash
// attention on (llama.cpp needs it for a quantized V cache), n_ctx 2048,
// teacher-forcing the same prompt_ids + greedy_ids of
// ../shared/reference/<model>.native.jsonl (294 steps per model) with
// type_k = type_v = f16 and then q8_0 / bf16, every vocabulary entry
// compared; docs/performance/kv-types.md ("KV types") has the table and how the
// figures were made. Ours are compared the same way, on the fast path (the
// server's), which rounds activations as llama.cpp does.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string_view>

#include "gtest/gtest.h"
#include "kernels/isa_test_util.h"
#include "tests/parity_engine.h"
#include "tests/reference_data.h"

namespace kvs {
namespace {

// How far one cache's logits are from another's over a set of steps.
struct LogitDrift {
  double max_abs = 0;   // largest |a - b| over every step and vocabulary entry
  double mean_kl = 0;   // mean over steps of KL(softmax(a) || softmax(b)), nats
  double max_kl = 0;
  int steps = 0;
  int argmax_equal = 0;
};

// KL(softmax(a) || softmax(b)) in double.
double KlDivergence(const std::vector<float>& a, const std::vector<float>& b) {
  const double ma = *std::max_element(a.begin(), a.end()), mb = *std::max_element(b.begin(), b.end());
  double za = 0, zb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    za += std::exp(a[i] - ma);
    zb += std::exp(b[i] - mb);
  }
  double kl = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double la = a[i] - ma - std::log(za), lb = b[i] - mb - std::log(zb);
    kl += std::exp(la) * (la - lb);
  }
  return std::max(0.0, kl);
}

// The logits after the prompt and after each greedy id (teacher forcing).
std::vector<std::vector<float>> TeacherForcedLogits(const std::string& model, KvDtype dtype,
                                                    const std::vector<ReferenceLine>& lines) {
  std::vector<std::vector<float>> out;
  auto engine = TestEngine::Load(model, dtype, MatmulPath::kFast);
  if (engine == nullptr) return out;
  for (const ReferenceLine& line : lines) {
    KvSequence kv(engine->pages.get());
    out.push_back(engine->Feed(kv, line.prompt_ids));
    for (int32_t next : line.greedy_ids) out.push_back(engine->Feed(kv, {&next, 1}));
  }
  return out;
}

LogitDrift Drift(const std::vector<std::vector<float>>& base, const std::vector<std::vector<float>>& other) {
  LogitDrift d;
  for (size_t s = 0; s < base.size() && s < other.size(); ++s) {
    for (size_t i = 0; i < base[s].size(); ++i) {
      d.max_abs = std::max<double>(d.max_abs, std::fabs(base[s][i] - other[s][i]));
    }
    const double kl = KlDivergence(base[s], other[s]);
    d.mean_kl += kl;
    d.max_kl = std::max(d.max_kl, kl);
    d.argmax_equal += std::max_element(base[s].begin(), base[s].end()) - base[s].begin() ==
                      std::max_element(other[s].begin(), other[s].end()) - other[s].begin();
    ++d.steps;
  }
  if (d.steps > 0) d.mean_kl /= d.steps;
  return d;
}

struct LlamaCppDrift {
  const char* model;
  KvDtype dtype;
  double max_abs;
  double mean_kl;
  double max_kl;
};

// llama.cpp's logits, f16 cache against the quantized one (see the top).
constexpr LlamaCppDrift kLlamaCpp[] = {
    {"tiny-llama-gqa", KvDtype::kQ8_0, 0.105219, 0.0000537, 0.0002445},
    {"tiny-llama-gqa", KvDtype::kBF16, 0.030822, 0.0000071, 0.0000207},
    {"tiny-llama-q8_0", KvDtype::kQ8_0, 0.204270, 0.0006579, 0.0012322},
    {"tiny-llama-q8_0", KvDtype::kBF16, 0.206981, 0.0005762, 0.0009502},
    {"tiny-llama-q4_0", KvDtype::kQ8_0, 0.249963, 0.0006785, 0.0015636},
    {"tiny-llama-q4_0", KvDtype::kBF16, 0.211852, 0.0005777, 0.0011265},
    {"tiny-llama-q4_k_m", KvDtype::kQ8_0, 0.302875, 0.0013562, 0.0022460},
    {"tiny-llama-q4_k_m", KvDtype::kBF16, 0.303522, 0.0012221, 0.0022970},
    // llama.cpp build 4748 has no qwen3 architecture: no figure (0), only
    // the determinism test runs.
    {"tiny-qwen3", KvDtype::kQ8_0, 0, 0, 0},
    {"tiny-qwen3", KvDtype::kBF16, 0, 0, 0},
};

class KvTypePrecisionTest : public ::testing::TestWithParam<LlamaCppDrift> {
 protected:
  void SetUp() override {
    model_ = SharedDir() + "/models/" + GetParam().model + ".gguf";
    const std::string ref = SharedDir() + "/reference/" + GetParam().model + ".native.jsonl";
    if (!std::filesystem::exists(model_) || !std::filesystem::exists(ref)) GTEST_SKIP() << "../shared absent";
    lines_ = LoadReference(ref);
  }
  // The bodies of the tests below, under whichever attention is chosen.
  void ExpectDriftWithinLlamaCpps();
  void ExpectOneArithmetic();

  std::string model_;
  std::vector<ReferenceLine> lines_;
};

// The mean KL divergence is the figure: at most llama.cpp's. A q8_0
// cache's scores round the query to Q8_0 as llama.cpp's do
// (kernels/attention_q8_0_scores.h), so there the figure is llama.cpp's
// own: on Zen 4, 0.99x, 1.00x, 1.00x and 1.01x of it on tiny-llama-gqa,
// -q8_0, -q4_0 and -q4_k_m. The bound allows 5% above llama.cpp's for
// q8_0, for the instruction sets' other summation orders in the weights'
// matmuls (below). The largest
// single |logit| change and KL are extremes of ~300 steps, dominated on the
// quantized-weight models by the fast path's activation rounding (a KV
// change that moves an activation across a Q8_0 rounding boundary moves
// the next layer by a whole quant step), in llama.cpp as here. Which
// boundary a value crosses depends on the kernels' summation order, which
// differs between instruction sets for the K-quant and Q4_0 weights (8 or
// 16 lanes), so the extremes are held against llama.cpp's larger figure
// of its two quantized caches on the model: at most 25% (|logit|) and 2x
// (KL) above it, the spread between llama.cpp's own q8_0 and bf16 figures
// on these models. (On an AVX2 machine, tiny-llama-q4_0 with bf16 moves
// one logit by 0.270, 1.28x llama.cpp's bf16 figure and 1.08x its q8_0
// one; on AVX-512, 0.259.)
TEST_P(KvTypePrecisionTest, LogitsMoveNoMoreThanLlamaCppsOwnWhenItsCacheIsQuantized) { ExpectDriftWithinLlamaCpps(); }

// The same with the AMX attention chosen (kernels/attention_amx.h: exact
// BF16 parts, AMX's summation), on a CPU with AMX-BF16.
TEST_P(KvTypePrecisionTest, OnAmxLogitsMoveNoMoreThanLlamaCppsOwnWhenItsCacheIsQuantized) {
  ScopedAmxAttention amx(true);
  if (!amx.supported()) GTEST_SKIP() << "no AMX-BF16 here";
  ExpectDriftWithinLlamaCpps();
}

void KvTypePrecisionTest::ExpectDriftWithinLlamaCpps() {
  const LlamaCppDrift& llama = GetParam();
  if (llama.max_abs == 0) GTEST_SKIP() << "no llama.cpp figure for " << llama.model;
  const auto f16 = TeacherForcedLogits(model_, KvDtype::kF16, lines_);
  const auto quantized = TeacherForcedLogits(model_, llama.dtype, lines_);
  ASSERT_GT(f16.size(), 100u);
  ASSERT_EQ(quantized.size(), f16.size());
  const LogitDrift ours = Drift(f16, quantized);
  RecordProperty("max_abs", std::to_string(ours.max_abs));
  RecordProperty("mean_kl", std::to_string(ours.mean_kl));
  RecordProperty("max_kl", std::to_string(ours.max_kl));
  double llama_max_abs = 0, llama_max_kl = 0;  // the model's larger llama.cpp extremes
  for (const LlamaCppDrift& other : kLlamaCpp) {
    if (std::string_view(other.model) != llama.model) continue;
    llama_max_abs = std::max(llama_max_abs, other.max_abs);
    llama_max_kl = std::max(llama_max_kl, other.max_kl);
  }
  const double mean_kl_bound = llama.dtype == KvDtype::kQ8_0 ? 1.05 * llama.mean_kl : llama.mean_kl;
  EXPECT_LE(ours.mean_kl, mean_kl_bound) << KvDtypeName(llama.dtype);
  EXPECT_LE(ours.max_abs, 1.25 * llama_max_abs) << KvDtypeName(llama.dtype);
  EXPECT_LE(ours.max_kl, 2 * llama_max_kl) << KvDtypeName(llama.dtype);
  // And the cache type matters at all (a test that cannot pass by accident):
  // the quantized cache is not the f16 cache under another name.
  EXPECT_GT(ours.max_abs, 0.0);
}

TEST_P(KvTypePrecisionTest, OnePrefillEqualsChunkedPrefillEqualsDecodeBitForBit) { ExpectOneArithmetic(); }

TEST_P(KvTypePrecisionTest, OnAmxOnePrefillEqualsChunkedPrefillEqualsDecodeBitForBit) {
  ScopedAmxAttention amx(true);
  if (!amx.supported()) GTEST_SKIP() << "no AMX-BF16 here";
  ExpectOneArithmetic();
}

void KvTypePrecisionTest::ExpectOneArithmetic() {
  auto engine = TestEngine::Load(model_, GetParam().dtype, MatmulPath::kFast);
  ASSERT_NE(engine, nullptr);
  const ReferenceLine& longest = *std::max_element(
      lines_.begin(), lines_.end(),
      [](const auto& a, const auto& b) { return a.prompt_ids.size() < b.prompt_ids.size(); });
  KvSequence one(engine->pages.get()), chunked(engine->pages.get()), decoded(engine->pages.get());
  const std::vector<float> a = engine->Feed(one, longest.prompt_ids);
  EXPECT_EQ(engine->Feed(chunked, longest.prompt_ids, 37), a);  // chunks cross page boundaries
  EXPECT_EQ(engine->Feed(decoded, longest.prompt_ids, 1), a);
}

void PrintTo(const LlamaCppDrift& d, std::ostream* os) { *os << d.model << " " << KvDtypeName(d.dtype); }

std::string Name(const ::testing::TestParamInfo<LlamaCppDrift>& info) {
  std::string n = std::string(info.param.model) + "_" + KvDtypeName(info.param.dtype);
  std::replace_if(n.begin(), n.end(), [](char c) { return !std::isalnum(c); }, '_');
  return n;
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, KvTypePrecisionTest, ::testing::ValuesIn(kLlamaCpp), Name);

}  // namespace
}  // namespace kvs
