#include "kernels/attention.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace kvs {
namespace {

// Naive causal attention in double for one query over keys [0, n).
std::vector<double> NaiveAttention(const float* q, const std::vector<float>& k,
                                   const std::vector<float>& v, int n, int hd, float scale) {
  std::vector<double> s(n);
  double mx = -1e300;
  for (int j = 0; j < n; ++j) {
    double d = 0;
    for (int c = 0; c < hd; ++c) d += static_cast<double>(q[c]) * k[j * hd + c];
    s[j] = d * scale;
    mx = std::max(mx, s[j]);
  }
  double z = 0;
  for (int j = 0; j < n; ++j) z += std::exp(s[j] - mx);
  std::vector<double> out(hd, 0.0);
  for (int j = 0; j < n; ++j) {
    const double p = std::exp(s[j] - mx) / z;
    for (int c = 0; c < hd; ++c) out[c] += p * v[j * hd + c];
  }
  return out;
}

class AttentionTest : public ::testing::TestWithParam<KvDtype> {};

TEST_P(AttentionTest, BlockedOnlineSoftmaxEqualsNaiveCausalAttention) {
  const KvDtype dtype = GetParam();
  const int hd = 32, block = 16, n_keys = 53, nq = 5;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> k(n_keys * hd), v(n_keys * hd), q(nq * hd);
  for (float& x : k) x = nd(rng);
  for (float& x : v) x = nd(rng);
  for (float& x : q) x = 2 * nd(rng);
  // Round-trip K/V through the cache type so the reference sees the same values.
  std::vector<uint8_t> kc(n_keys * hd * KvDtypeBytes(dtype)), vc(kc.size());
  StoreKv(dtype, k.data(), kc.data(), k.size());
  StoreKv(dtype, v.data(), vc.data(), v.size());
  LoadKv(dtype, kc.data(), k.data(), k.size());
  LoadKv(dtype, vc.data(), v.data(), v.size());

  // Query i sits at position pos[i] (causal: it sees keys 0..pos[i]).
  int pos[nq];
  for (int i = 0; i < nq; ++i) pos[i] = std::min(n_keys - 1, 28 + 6 * i);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> m(nq), l(nq), acc(nq * hd), out(nq * hd);
  std::vector<float> scratch(AttentionScratchFloats(block, hd));
  AttentionInit(nq, hd, m.data(), l.data(), acc.data());
  for (int b0 = 0; b0 < n_keys; b0 += block) {
    const int nb = std::min(block, n_keys - b0);
    int visible[nq];
    for (int i = 0; i < nq; ++i) visible[i] = std::clamp(pos[i] - b0 + 1, 0, nb);
    const size_t off = static_cast<size_t>(b0) * hd * KvDtypeBytes(dtype);
    AttentionUpdate(dtype, q.data(), hd, nq, kc.data() + off, vc.data() + off, nb, hd, visible,
                    scale, m.data(), l.data(), acc.data(), scratch.data());
  }
  AttentionFinish(nq, hd, l.data(), acc.data(), out.data(), hd);
  for (int i = 0; i < nq; ++i) {
    std::vector<double> ref = NaiveAttention(q.data() + i * hd, k, v, pos[i] + 1, hd, scale);
    for (int c = 0; c < hd; ++c) EXPECT_NEAR(out[i * hd + c], ref[c], 1e-5) << i << "," << c;
  }
}

INSTANTIATE_TEST_SUITE_P(KvTypes, AttentionTest, ::testing::Values(KvDtype::kF32, KvDtype::kF16),
                         [](const auto& info) { return std::string(KvDtypeName(info.param)); });

}  // namespace
}  // namespace kvs
