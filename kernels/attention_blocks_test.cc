// AttentionUpdateBlocks: several KV blocks (pages) folded in one step equal
// naive causal attention over the concatenated keys, on every kernel level,
// for every cache type (a q8_0 cache's queries rounded to Q8_0, as
// llama.cpp rounds them), register-resident head sizes and the fallback.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "kernels/attention_test_util.h"
#include "kernels/isa_test_util.h"

namespace kvs {
namespace {

// The ends of the online-softmax steps in which every kernel folds keys
// [0, n) given in two calls, the first of `first_call` keys: one step per
// call, whatever the head size or the paging.
std::vector<int> StepEnds(int n, int first_call) {
  std::vector<int> ends;
  if (first_call < n) ends.push_back(first_call);
  ends.push_back(n);
  return ends;
}

TEST(AttentionBlocksTest, ManyBlocksEqualNaiveAttentionOnEveryLevel) {
  for (KernelIsa isa : AllKernelIsas()) {
    if (!KernelIsaSupported(isa)) continue;
    ScopedKernelIsa active(isa);
    for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16, KvDtype::kQ8_0}) {
      for (int hd : {16, 64, 128, 96}) {
        if (!KvDtypeFitsHeadDim(dtype, hd)) continue;
        const int block = 16, n_blocks = 7, rows = 3, heads = 2;
        const int keys = block * n_blocks;
        std::mt19937 rng(hd);
        std::normal_distribution<float> nd(0, 1);
        std::vector<float> k(keys * hd), v(keys * hd), q(rows * heads * hd);
        for (float& x : k) x = nd(rng);
        for (float& x : v) x = nd(rng);
        for (float& x : q) x = nd(rng);
        const size_t rb = KvBytes(dtype, hd);  // one key's bytes
        std::vector<uint8_t> kc(keys * rb), vc(keys * rb);
        StoreKv(dtype, k.data(), kc.data(), k.size());
        StoreKv(dtype, v.data(), vc.data(), v.size());
        LoadKv(dtype, kc.data(), k.data(), k.size());
        LoadKv(dtype, vc.data(), v.data(), v.size());
        KeysAsCached(dtype, kc.data(), keys, hd);
        const std::vector<uint8_t> vcached = ValuesAsCached(dtype, vc.data(), keys, hd, block);
        // Blocks in reverse memory order: pages need not be contiguous.
        std::vector<const void*> kb(n_blocks), vb(n_blocks);
        std::vector<uint8_t> kr(kc.size()), vr(vc.size());
        for (int b = 0; b < n_blocks; ++b) {
          const size_t bytes = static_cast<size_t>(block) * rb, dst = (n_blocks - 1 - b) * bytes;
          std::copy_n(kc.begin() + b * bytes, bytes, kr.begin() + dst);
          std::copy_n(vcached.begin() + b * bytes, bytes, vr.begin() + dst);
          kb[b] = kr.data() + dst;
          vb[b] = vr.data() + dst;
        }
        const int visible[rows] = {keys, 50, 17};
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        std::vector<float> m(rows * heads), l(rows * heads), acc(rows * heads * hd), out(rows * heads * hd);
        std::vector<float> scratch(AttentionBlocksScratchFloats(keys, block, hd, heads));
        AttentionInit(rows * heads, hd, m.data(), l.data(), acc.data());
        // Two calls: blocks [0, 3) then [3, 7), as a long context is folded.
        int vis_a[rows], vis_b[rows];
        for (int r = 0; r < rows; ++r) {
          vis_a[r] = std::min(visible[r], 3 * block);
          vis_b[r] = std::max(0, visible[r] - 3 * block);
        }
        AttentionUpdateBlocks(dtype, q.data(), heads * hd, rows, heads, kb.data(), vb.data(), 3, block, hd,
                              vis_a, scale, m.data(), l.data(), acc.data(), scratch.data());
        AttentionUpdateBlocks(dtype, q.data(), heads * hd, rows, heads, kb.data() + 3, vb.data() + 3, 4,
                              block, hd, vis_b, scale, m.data(), l.data(), acc.data(), scratch.data());
        AttentionFinish(rows, heads, hd, l.data(), acc.data(), out.data(), heads * hd);
        const std::vector<float> scored = QueriesAsScored(dtype, q, hd);
        for (int r = 0; r < rows; ++r) {
          for (int h = 0; h < heads; ++h) {
            const float* qi = scored.data() + (r * heads + h) * hd;
            std::vector<double> s(visible[r]);
            for (int j = 0; j < visible[r]; ++j) {
              double d = 0;
              for (int c = 0; c < hd; ++c) d += static_cast<double>(qi[c]) * k[j * hd + c];
              s[j] = d * scale;
            }
            // Two calls: the first 3 blocks, then the rest.
            const NaiveValueSum want =
                NaiveValues(dtype, s, StepEnds(visible[r], 3 * block), v, vc.data(), hd, block);
            for (int c = 0; c < hd; ++c) {
              ASSERT_NEAR(out[(r * heads + h) * hd + c], want.out[c], 2e-5 + want.slack[c])
                  << KernelIsaName(isa) << " " << KvDtypeName(dtype) << " hd " << hd << " row " << r;
            }
          }
        }
      }
    }
  }
}

// The fallback kernel (head sizes that are not 1, 2, 4, 8 or 16 vectors)
// with a prefill's many rows: every row gets its own causal attention.
TEST(AttentionBlocksTest, TheFallbackHeadSizesGiveEachOfManyRowsItsOwnAttentionOnEveryLevel) {
  const int block = 16, n_blocks = 10, rows = 150, heads = 2;
  const int keys = block * n_blocks;
  for (KernelIsa isa : AllKernelIsas()) {
    if (!KernelIsaSupported(isa)) continue;
    ScopedKernelIsa active(isa);
    for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16, KvDtype::kQ8_0}) {
      for (int hd : {40, 96}) {
        if (!KvDtypeFitsHeadDim(dtype, hd)) continue;
        std::mt19937 rng(hd + 1);
        std::normal_distribution<float> nd(0, 1);
        std::vector<float> k(keys * hd), v(keys * hd), q(rows * heads * hd);
        for (float& x : k) x = nd(rng);
        for (float& x : v) x = nd(rng);
        for (float& x : q) x = nd(rng);
        const size_t rb = KvBytes(dtype, hd);  // one key's bytes
        std::vector<uint8_t> kc(keys * rb), vc(keys * rb);
        StoreKv(dtype, k.data(), kc.data(), k.size());
        StoreKv(dtype, v.data(), vc.data(), v.size());
        LoadKv(dtype, kc.data(), k.data(), k.size());
        LoadKv(dtype, vc.data(), v.data(), v.size());
        KeysAsCached(dtype, kc.data(), keys, hd);
        const std::vector<uint8_t> vcached = ValuesAsCached(dtype, vc.data(), keys, hd, block);
        std::vector<const void*> kb(n_blocks), vb(n_blocks);
        for (int b = 0; b < n_blocks; ++b) {
          kb[b] = kc.data() + static_cast<size_t>(b) * block * rb;
          vb[b] = vcached.data() + static_cast<size_t>(b) * block * rb;
        }
        std::vector<int> visible(rows);
        for (int r = 0; r < rows; ++r) visible[r] = keys - rows + 1 + r;  // a prefill's last rows
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        std::vector<float> m(rows * heads), l(rows * heads), acc(rows * heads * hd), out(rows * heads * hd);
        std::vector<float> scratch(AttentionBlocksScratchFloats(keys, block, hd, heads));
        AttentionInit(rows * heads, hd, m.data(), l.data(), acc.data());
        AttentionUpdateBlocks(dtype, q.data(), heads * hd, rows, heads, kb.data(), vb.data(), n_blocks,
                              block, hd, visible.data(), scale, m.data(), l.data(), acc.data(),
                              scratch.data());
        AttentionFinish(rows, heads, hd, l.data(), acc.data(), out.data(), heads * hd);
        const std::vector<float> scored = QueriesAsScored(dtype, q, hd);
        for (int r : {0, 63, 64, 100, 127, 128, rows - 1}) {
          for (int h = 0; h < heads; ++h) {
            const float* qi = scored.data() + (r * heads + h) * hd;
            std::vector<double> s(visible[r]);
            for (int j = 0; j < visible[r]; ++j) {
              double d = 0;
              for (int c = 0; c < hd; ++c) d += static_cast<double>(qi[c]) * k[j * hd + c];
              s[j] = d * scale;
            }
            const NaiveValueSum want =
                NaiveValues(dtype, s, StepEnds(visible[r], keys), v, vc.data(), hd, block);
            for (int c = 0; c < hd; ++c) {
              ASSERT_NEAR(out[(r * heads + h) * hd + c], want.out[c], 2e-5 + want.slack[c])
                  << KernelIsaName(isa) << " " << KvDtypeName(dtype) << " hd " << hd << " row " << r;
            }
          }
        }
      }
    }
  }
}

// Pages are how the server stores keys, not part of the arithmetic: the
// same keys folded as pages of 16, 32 or 48 keys (multiples of 16, as
// attention.h states) give the same bits, on every level, cache type and
// head size (fixed kernels, the fallback, and the tiled kernel for a
// prefill's many rows). Such pages keep the vector levels' key groups
// and the q8_0 value kernels' groups of keys [16g, 16g + 16). With
// KVS_AMX_ATTENTION=1 (the kernels_amx_attention test) the AMX kernels'
// value products take keys [32c, 32c + 32) of the sequence whatever the
// pages: two pages of 16, or parts of two pages of 48.
TEST(AttentionBlocksTest, AResultDoesNotDependOnHowTheKeysArePagedOnEveryLevel) {
  const int keys = 96, heads = 2;
  for (KernelIsa isa : AllKernelIsas()) {
    if (!KernelIsaSupported(isa)) continue;
    ScopedKernelIsa active(isa);
    for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16, KvDtype::kQ8_0}) {
      for (int hd : {40, 64, 96, 128, 160}) {
        if (!KvDtypeFitsHeadDim(dtype, hd)) continue;
        for (int rows : {3, 40}) {
          std::mt19937 rng(hd * 7 + rows);
          std::normal_distribution<float> nd(0, 1);
          std::vector<float> k(keys * hd), v(keys * hd), q(rows * heads * hd);
          for (float& x : k) x = nd(rng);
          for (float& x : v) x = nd(rng);
          for (float& x : q) x = 2 * nd(rng);  // peaked weights: a rescale shows in the bits
          const size_t rb = KvBytes(dtype, hd);
          std::vector<uint8_t> kc(keys * rb), vc(keys * rb);
          StoreKv(dtype, k.data(), kc.data(), k.size());
          StoreKv(dtype, v.data(), vc.data(), v.size());
          KeysAsCached(dtype, kc.data(), keys, hd);
          std::vector<int> visible(rows);
          for (int r = 0; r < rows; ++r) visible[r] = keys - rows + 1 + r;
          const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
          std::vector<std::vector<float>> outs;
          for (int page : {16, 32, 48}) {
            const int n_blocks = keys / page;
            const std::vector<uint8_t> vcached = ValuesAsCached(dtype, vc.data(), keys, hd, page);
            std::vector<const void*> kb(n_blocks), vb(n_blocks);
            for (int b = 0; b < n_blocks; ++b) {
              kb[b] = kc.data() + static_cast<size_t>(b) * page * rb;
              vb[b] = vcached.data() + static_cast<size_t>(b) * page * rb;
            }
            std::vector<float> m(rows * heads), l(rows * heads), acc(rows * heads * hd), out(rows * heads * hd);
            std::vector<float> scratch(AttentionBlocksScratchFloats(keys, page, hd, heads));
            AttentionInit(rows * heads, hd, m.data(), l.data(), acc.data());
            AttentionUpdateBlocks(dtype, q.data(), heads * hd, rows, heads, kb.data(), vb.data(), n_blocks, page,
                                  hd, visible.data(), scale, m.data(), l.data(), acc.data(), scratch.data());
            AttentionFinish(rows, heads, hd, l.data(), acc.data(), out.data(), heads * hd);
            outs.push_back(out);
          }
          for (size_t p = 1; p < outs.size(); ++p) {
            for (size_t i = 0; i < outs[0].size(); ++i) {
              ASSERT_EQ(outs[0][i], outs[p][i]) << KernelIsaName(isa) << " " << KvDtypeName(dtype) << " hd " << hd
                                                << " rows " << rows << " pages " << p << " value " << i;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvs
