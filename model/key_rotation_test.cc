// KeyRotation against the real model: keys the transformer computed at
// positions p + d, turned by -d, equal the keys it computes directly at p
// (every layer, head and slot), within f16 rounding. The shift keeps every
// relative position, so the pre-RoPE keys are the same in both runs.
#include "model/key_rotation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/kv_sequence.h"
#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "kernels/q8_0_kv_blocks.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "model/transformer.h"

namespace kvs {
namespace {

std::string ModelPath(const std::string& name) { return absl::StrCat(KVS_SHARED_DIR, "/models/", name); }

constexpr int kPageTokens = 16;

KvGeometry Geometry(const Model& m, KvDtype dtype) {
  return {m.config().n_layers, m.config().n_kv_heads, m.config().head_dim, kPageTokens, dtype};
}

// Prefills `tokens` with RoPE positions offset by `offset`.
void Prefill(const Model& m, KvSequence* kv, const std::vector<int32_t>& tokens, int offset) {
  ThreadPool threads(2);
  Transformer t(m.config(), m.weights(), &threads, 256, m.config().context_length,
                MatmulPath::kExact);
  ASSERT_TRUE(kv->PrepareAppend(static_cast<int>(tokens.size())).ok());
  ForwardItem item{kv, tokens, Logits::kLast, offset};
  std::vector<float> logits(m.config().vocab_size);
  absl::Status s = t.Forward({&item, 1}, logits.data());
  ASSERT_TRUE(s.ok()) << s;
}

std::vector<float> Keys(const KvSequence& kv, int pos, int layer, int head) {
  const KvGeometry& g = kv.geometry();
  std::vector<float> out(g.head_dim);
  if (g.dtype == KvDtype::kQ8_0) {  // packed key groups (q8_0_kv_blocks.h)
    std::vector<uint8_t> row(g.row_bytes());
    LoadQ8_0KeySlot(kv.block(pos / g.page_tokens, layer, KvPart::kKey, head), g.head_dim, pos % g.page_tokens,
                    row.data());
    LoadKv(KvDtype::kQ8_0, row.data(), out.data(), out.size());
    return out;
  }
  LoadKv(g.dtype, kv.slot(pos, layer, KvPart::kKey, head), out.data(), out.size());
  return out;
}

// Largest |a - b| over every key of the two sequences, in units of the
// f16 spacing at the key's magnitude (2^-10 relative, 2^-14 absolute floor).
double WorstKeyErrorInF16Ulps(const KvSequence& a, const KvSequence& b) {
  const KvGeometry& g = a.geometry();
  double worst = 0;
  for (int pos = 0; pos < a.length(); ++pos) {
    for (int layer = 0; layer < g.n_layers; ++layer) {
      for (int head = 0; head < g.n_kv_heads; ++head) {
        const std::vector<float> ka = Keys(a, pos, layer, head), kb = Keys(b, pos, layer, head);
        float scale = 0;
        for (float v : kb) scale = std::max(scale, std::fabs(v));
        const double ulp = std::max(std::ldexp(1.0, -14), std::ldexp(static_cast<double>(scale), -10));
        for (size_t i = 0; i < ka.size(); ++i) worst = std::max(worst, std::fabs(ka[i] - kb[i]) / ulp);
      }
    }
  }
  return worst;
}

struct Case {
  const char* model;
  RopeStyle style;
};

class KeyRotationTest : public ::testing::TestWithParam<Case> {};

// `kv` (f32 pages) as `dtype` pages of `pool`, each element rounded once.
KvSequence Convert(const KvSequence& kv, PagePool* pool) {
  KvSequence out(pool);
  EXPECT_TRUE(out.PrepareAppend(kv.length()).ok());
  out.CommitAppend(kv.length());
  const int64_t n = static_cast<int64_t>(kv.geometry().page_bytes() / sizeof(float));
  for (int p = 0; p < kv.num_pages(); ++p) {
    StoreKv(pool->geometry().dtype, reinterpret_cast<const float*>(kv.pool()->data(kv.page_table()[p])),
            pool->data(out.page_table()[p]), n);
    // q8_0 keys as the cache holds them: rows to packed groups.
    const KvGeometry& g = pool->geometry();
    if (g.dtype != KvDtype::kQ8_0) continue;
    std::vector<uint8_t> rows(g.block_bytes());
    for (int layer = 0; layer < g.n_layers; ++layer) {
      for (int head = 0; head < g.n_kv_heads; ++head) {
        uint8_t* block = pool->data(out.page_table()[p]) + g.block_offset(layer, KvPart::kKey, head);
        std::memcpy(rows.data(), block, rows.size());
        Q8_0KeyBlockFromRows(rows.data(), g.page_tokens, g.head_dim, block);
      }
    }
  }
  return out;
}

// The model computes the keys with f32 KV and exact (f32) matmul
// activations: with f16 KV each layer's attention would read keys rounded at
// different angles in the two runs, and the fast path's Q8_0 activation
// rounding can amplify a last-bit difference into a quantization step; the
// later layers' keys would then differ by that, not by the rotation.
// The cache's f16 pages are then the f32 keys rounded once, as the
// transformer stores them.
TEST_P(KeyRotationTest, KeysComputedAtShiftedPositionsTurnBackToTheKeysAtTheOriginalPositions) {
  auto model = Model::Load(ModelPath(GetParam().model));
  ASSERT_TRUE(model.ok()) << model.status();
  const Model& m = **model;
  ASSERT_EQ(m.config().rope_style, GetParam().style);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 2 * kPageTokens + 5; ++i) tokens.push_back((7 + 31 * i) % m.config().vocab_size);
  const KeyRotation rotation(m.config(), m.weights());
  for (int shift : {1, 37, 1000}) {
    PagePool f32_pool(Geometry(m, KvDtype::kF32), 16);
    KvSequence direct32(&f32_pool), shifted32(&f32_pool);
    Prefill(m, &direct32, tokens, 0);
    Prefill(m, &shifted32, tokens, shift);
    for (KvDtype dtype : {KvDtype::kF16, KvDtype::kF32, KvDtype::kBF16, KvDtype::kQ8_0}) {
      if (!KvDtypeFitsHeadDim(dtype, m.config().head_dim)) continue;
      SCOPED_TRACE(std::string(KvDtypeName(dtype)) + " shift " + std::to_string(shift));
      PagePool pool(Geometry(m, dtype), 16);
      KvSequence direct = Convert(direct32, &pool), shifted = Convert(shifted32, &pool);
      // Unturned, the shifted keys are far from the direct ones.
      EXPECT_GT(WorstKeyErrorInF16Ulps(shifted, direct), 100);
      for (int p = 0; p < shifted.num_pages(); ++p) {
        const int slots = std::min(kPageTokens, shifted.length() - p * kPageTokens);
        rotation.Rotate(pool.geometry(), pool.data(shifted.page_table()[p]), slots, -shift);
      }
      const double worst = WorstKeyErrorInF16Ulps(shifted, direct);
      std::printf("%s %s shift %d: worst key error %.3f f16 ulps\n", GetParam().model,
                  KvDtypeName(dtype), shift, worst);
      // f16: two roundings (the stored key, the turned key), each at most
      // half a spacing of the key's own magnitude. bf16 and q8_0: three
      // roundings (the shifted key, the turned key, the direct key), each
      // at most half a step of a value or block at most sqrt(2) x the
      // head's largest (turning a RoPE pair moves magnitude between its
      // two values): 1.5 x sqrt(2) x 8 f16 spacings for bf16's 2^-7
      // relative step, and x 8.06 for q8_0's max|block| / 127 step.
      const double bound[] = {0.05, 1.5, 17.1, 17.0};  // f32, f16, q8_0, bf16
      EXPECT_LE(worst, bound[static_cast<int>(dtype)]);
    }
  }
}

TEST(KeyRotationUnitTest, TurningByZeroOrNoSlotsLeavesThePageUnchanged) {
  auto model = Model::Load(ModelPath("tiny-llama-q8_0.gguf"));
  ASSERT_TRUE(model.ok()) << model.status();
  const Model& m = **model;
  PagePool pool(Geometry(m, KvDtype::kF32), 4);
  KvSequence kv(&pool);
  std::vector<int32_t> tokens(kPageTokens, 5);
  Prefill(m, &kv, tokens, 0);
  uint8_t* page = pool.data(kv.page_table()[0]);
  const std::vector<uint8_t> before(page, page + pool.geometry().page_bytes());
  const KeyRotation rotation(m.config(), m.weights());
  rotation.Rotate(pool.geometry(), page, kPageTokens, 0);
  rotation.Rotate(pool.geometry(), page, 0, 5);
  EXPECT_EQ(std::vector<uint8_t>(page, page + pool.geometry().page_bytes()), before);
  // Turning by +d then -d comes back (f32 keys: within float rounding).
  rotation.Rotate(pool.geometry(), page, kPageTokens, 123);
  EXPECT_NE(std::vector<uint8_t>(page, page + pool.geometry().page_bytes()), before);
  rotation.Rotate(pool.geometry(), page, kPageTokens, -123);
  const float* a = reinterpret_cast<const float*>(before.data());
  const float* b = reinterpret_cast<const float*>(page);
  for (size_t i = 0; i < pool.geometry().page_bytes() / 4; ++i) ASSERT_NEAR(a[i], b[i], 1e-4f * (1 + std::fabs(a[i])));
}

INSTANTIATE_TEST_SUITE_P(Models, KeyRotationTest,
                         ::testing::Values(Case{"tiny-qwen3.gguf", RopeStyle::kNeox},
                                           Case{"tiny-llama-q8_0.gguf", RopeStyle::kAdjacent}),
                         [](const auto& info) {
                           return std::string(info.param.style == RopeStyle::kNeox ? "Qwen3Neox"
                                                                                   : "LlamaNorm");
                         });

}  // namespace
}  // namespace kvs
