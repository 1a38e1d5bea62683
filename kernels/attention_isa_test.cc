// AttentionUpdate and the F16 KV conversions under every kernel level the
// CPU supports, against the scalar reference: F16 and F32 caches, GQA
// groups, causal visibility across several blocks, head sizes with and
// without a vector tail.
#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "kernels/attention_test_util.h"
#include "kernels/isa_test_util.h"

namespace kvs {
namespace {

struct AttentionCase {
  int head_dim;
  int heads;       // query heads per KV head
  int rows;        // query rows (tokens)
  int block;       // keys per block
  int n_keys;
};

// Runs blocked causal attention of rows x heads queries over the keys;
// query row r sits at position first_pos + r.
std::vector<float> Attend(KvDtype dtype, const AttentionCase& c, const std::vector<float>& q,
                          const std::vector<uint8_t>& k, const std::vector<uint8_t>& v,
                          int first_pos) {
  const int nq = c.rows * c.heads;
  std::vector<float> m(nq), l(nq), acc(nq * c.head_dim), out(nq * c.head_dim);
  std::vector<float> scratch(AttentionScratchFloats(c.block, c.head_dim));
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  AttentionInit(nq, c.head_dim, m.data(), l.data(), acc.data());
  for (int b0 = 0; b0 < c.n_keys; b0 += c.block) {
    const int nb = std::min(c.block, c.n_keys - b0);
    std::vector<int> visible(c.rows);
    for (int r = 0; r < c.rows; ++r) visible[r] = std::clamp(first_pos + r - b0 + 1, 0, nb);
    const size_t off = KvBytes(dtype, static_cast<int64_t>(b0) * c.head_dim);
    // A block of nb values as a page of nb tokens holds them.
    const std::vector<uint8_t> values = ValuesAsCached(dtype, v.data() + off, nb, c.head_dim, nb);
    AttentionUpdate(dtype, q.data(), c.heads * c.head_dim, c.rows, c.heads, k.data() + off,
                    values.data(), nb, c.head_dim, visible.data(), scale, m.data(), l.data(),
                    acc.data(), scratch.data());
  }
  AttentionFinish(c.rows, c.heads, c.head_dim, l.data(), acc.data(), out.data(), c.heads * c.head_dim);
  return out;
}

class AttentionIsaTest : public ::testing::TestWithParam<std::tuple<KernelIsa, KvDtype>> {
 protected:
  void SetUp() override {
    if (!KernelIsaSupported(isa())) GTEST_SKIP() << KernelIsaName(isa()) << " not supported here";
  }
  KernelIsa isa() const { return std::get<0>(GetParam()); }
  KvDtype dtype() const { return std::get<1>(GetParam()); }
};

TEST_P(AttentionIsaTest, MatchesScalarReference) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0, 1);
  // The last two: blocks of 7 and of 48 keys (AMX's key groups and
  // chunks cut by the block's end), head sizes AMX takes.
  for (const AttentionCase& c : {AttentionCase{64, 4, 3, 16, 53}, AttentionCase{40, 2, 5, 32, 70},
                                 AttentionCase{128, 8, 1, 256, 600}, AttentionCase{16, 1, 16, 7, 30},
                                 AttentionCase{96, 2, 9, 7, 45}, AttentionCase{32, 3, 20, 48, 150}}) {
    if (!KvDtypeFitsHeadDim(dtype(), c.head_dim)) continue;
    if (dtype() == KvDtype::kQ8_0 && c.block % kQ8_0KeyGroupSlots != 0) continue;  // not a q8_0 cache's page
    std::vector<float> q(c.rows * c.heads * c.head_dim), kf(c.n_keys * c.head_dim), vf(kf.size());
    for (float& x : q) x = 2 * nd(rng);
    for (float& x : kf) x = nd(rng);
    for (float& x : vf) x = nd(rng);
    std::vector<uint8_t> k(KvBytes(dtype(), static_cast<int64_t>(kf.size()))), v(k.size());
    StoreKv(dtype(), kf.data(), k.data(), kf.size());
    StoreKv(dtype(), vf.data(), v.data(), vf.size());
    KeysAsCached(dtype(), k, c.n_keys, c.head_dim);
    for (int first_pos : {0, c.n_keys - c.rows}) {
      std::vector<float> want;
      {
        ScopedKernelIsa scalar(KernelIsa::kScalar);
        want = Attend(dtype(), c, q, k, v, first_pos);
      }
      ScopedKernelIsa active(isa());
      std::vector<float> got = Attend(dtype(), c, q, k, v, first_pos);
      // A q8_0 cache's values where this level's contract is not the scalar one's.
      const double gap = dtype() == KvDtype::kQ8_0 ? Q8_0ContractGap(c.head_dim, MaxAbs(vf)) : 0;
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 1e-5 + gap) << "head_dim " << c.head_dim << " pos " << first_pos << " i " << i;
      }
    }
  }
}

// Head sizes of a fixed kernel (64 for q8_0) and of the fallback (48 and
// 96 at AVX2, 96 at AVX-512), which takes two queries' values together.
TEST_P(AttentionIsaTest, EachQueryIgnoresTheOtherQueriesInTheCall) {
  ScopedKernelIsa active(isa());
  std::mt19937 rng(6);
  std::normal_distribution<float> nd(0, 1);
  for (int head_dim : {dtype() == KvDtype::kQ8_0 ? 64 : 48, 96}) {
    const AttentionCase group{head_dim, 4, 3, 16, 40};
    std::vector<float> q(group.rows * group.heads * group.head_dim), kf(group.n_keys * group.head_dim),
        vf(kf.size());
    for (float& x : q) x = nd(rng);
    for (float& x : kf) x = nd(rng);
    for (float& x : vf) x = nd(rng);
    std::vector<uint8_t> k(KvBytes(dtype(), static_cast<int64_t>(kf.size()))), v(k.size());
    StoreKv(dtype(), kf.data(), k.data(), kf.size());
    StoreKv(dtype(), vf.data(), v.data(), vf.size());
    KeysAsCached(dtype(), k, group.n_keys, group.head_dim);
    const int first_pos = 30;
    std::vector<float> together = Attend(dtype(), group, q, k, v, first_pos);
    for (int r = 0; r < group.rows; ++r) {
      for (int h = 0; h < group.heads; ++h) {
        const AttentionCase one{group.head_dim, 1, 1, group.block, group.n_keys};
        const size_t at = static_cast<size_t>(r * group.heads + h) * group.head_dim;
        std::vector<float> q1(q.begin() + at, q.begin() + at + group.head_dim);
        std::vector<float> alone = Attend(dtype(), one, q1, k, v, first_pos + r);
        for (int d = 0; d < group.head_dim; ++d) {
          ASSERT_TRUE(SameBits(together[at + d], alone[d])) << "hd " << head_dim << " " << r << "," << h << "," << d;
        }
      }
    }
  }
}

TEST_P(AttentionIsaTest, KvConversionsGiveTheScalarBits) {
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0, 100);
  for (int64_t n : {1, 7, 16, 37, 1000, 32, 96, 1024}) {
    if (dtype() == KvDtype::kQ8_0 && n % kKvQ8_0BlockValues != 0) continue;  // rows of 32k values
    std::vector<float> src(n);
    for (float& x : src) x = nd(rng);
    src[0] = 65520.0f;  // rounds to infinity
    std::vector<uint8_t> want(KvBytes(dtype(), n)), got(want.size());
    std::vector<float> want_back(n), got_back(n);
    {
      ScopedKernelIsa scalar(KernelIsa::kScalar);
      StoreKv(dtype(), src.data(), want.data(), n);
      LoadKv(dtype(), want.data(), want_back.data(), n);
    }
    ScopedKernelIsa active(isa());
    StoreKv(dtype(), src.data(), got.data(), n);
    LoadKv(dtype(), got.data(), got_back.data(), n);
    EXPECT_EQ(got, want) << n;
    for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(SameBits(got_back[i], want_back[i])) << n << " " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllLevels, AttentionIsaTest,
    ::testing::Combine(::testing::ValuesIn(AllKernelIsas()),
                       ::testing::Values(KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16, KvDtype::kQ8_0)),
    [](const auto& info) {
      return std::string(KernelIsaName(std::get<0>(info.param))) + "_" +
             KvDtypeName(std::get<1>(info.param));
    });

}  // namespace
}  // namespace kvs
