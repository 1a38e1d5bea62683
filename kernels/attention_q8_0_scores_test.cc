// Q8_0 keys' scores (attention_q8_0_scores.h): on every kernel level, for
// any number of queries and any block size the cache allows, each score
// has the bits of the stated arithmetic, computed here key by key in plain
// integers from the keys' Q8_0 rows; the scored blocks hold the same keys
// as the cache does (q8_0_kv_blocks.h), their unused slots filled with
// bytes that must not matter.
#include "kernels/attention_q8_0_scores.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "kernels/fp16.h"
#include "kernels/isa_test_util.h"
#include "kernels/q8_0_kv_blocks.h"

namespace kvs {
namespace {

// The stated arithmetic for one rounded query (attention scale in its
// block scales) and one Q8_0 key row.
float StatedScore(const uint8_t* query, const uint8_t* key, int hd) {
  float y = 0;
  for (int b = 0; b < hd / 32; ++b) {
    const uint8_t* block = key + b * kKvQ8_0BlockBytes;
    uint16_t dk;
    std::memcpy(&dk, block, 2);
    float dq;
    std::memcpy(&dq, query + hd + 4 * b, 4);
    int32_t isum = 0;
    for (int d = 0; d < 32; ++d) isum += static_cast<int8_t>(block[2 + d]) * static_cast<int8_t>(query[32 * b + d]);
    y = std::fma(static_cast<float>(isum), Fp16ToFp32(dk) * dq, y);
  }
  return y;
}

// A key block of block_keys slots (a multiple of 16) holding the first n
// of `rows` (Q8_0 rows of hd values), its other slots 0xCD bytes.
std::vector<uint8_t> KeyBlock(const uint8_t* rows, int n, int hd, int block_keys) {
  std::vector<uint8_t> block(static_cast<size_t>(block_keys) * KvBytes(KvDtype::kQ8_0, hd), 0xCD);
  Q8_0KeyBlockFromRows(rows, n, hd, block.data());
  return block;
}

TEST(AttentionQ8_0ScoresTest, EveryLevelGivesEachScoreTheBitsOfTheStatedArithmetic) {
  const int n_keys = 300;  // more than one packed chunk at every head size
  for (KernelIsa isa : AllKernelIsas()) {
    if (!KernelIsaSupported(isa)) continue;
    ScopedKernelIsa active(isa);
    for (int hd : {32, 128, 256, kQ8_0ScoresMaxHeadDim}) {
      for (int block_keys : {16, 32, 64}) {
        std::mt19937 rng(static_cast<unsigned>(hd + block_keys));
        std::normal_distribution<float> nd(0, 1);
        const size_t rb = KvBytes(KvDtype::kQ8_0, hd);
        std::vector<float> k(static_cast<size_t>(n_keys) * hd);
        for (float& x : k) x = nd(rng);
        std::vector<uint8_t> kc(n_keys * rb);
        StoreKv(KvDtype::kQ8_0, k.data(), kc.data(), k.size());
        // Blocks in reverse memory order, as pages may lie.
        const int n_blocks = (n_keys + block_keys - 1) / block_keys;
        const size_t bytes = static_cast<size_t>(block_keys) * rb;
        std::vector<uint8_t> paged(static_cast<size_t>(n_blocks) * bytes);
        std::vector<const void*> blocks(n_blocks);
        for (int b = 0; b < n_blocks; ++b) {
          const size_t at = (n_blocks - 1 - b) * bytes;
          const int have = std::min(block_keys, n_keys - b * block_keys);
          const std::vector<uint8_t> block = KeyBlock(kc.data() + b * bytes, have, hd, block_keys);
          std::memcpy(paged.data() + at, block.data(), bytes);
          blocks[b] = paged.data() + at;
        }
        for (int nq : {1, 2, 3, 4, 5, 17, 32}) {
          std::vector<float> q(static_cast<size_t>(nq) * hd);
          for (float& x : q) x = 3 * nd(rng);
          const size_t qb = QueryQ8_0Bytes(hd);
          std::vector<uint8_t> rounded(nq * qb);
          const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
          for (int j = 0; j < nq; ++j) QuantizeQueryQ8_0(q.data() + j * hd, hd, scale, rounded.data() + j * qb);
          const size_t stride = n_keys + 3;
          std::vector<float> scores(nq * stride, -1.0f);
          ScoresQ8_0(rounded.data(), nq, hd, blocks.data(), block_keys, n_keys, scores.data(), stride);
          for (int j = 0; j < nq; ++j) {
            for (int key = 0; key < n_keys; ++key) {
              const float want = StatedScore(rounded.data() + j * qb, kc.data() + key * rb, hd);
              ASSERT_EQ(want, scores[j * stride + key]) << KernelIsaName(isa) << " hd " << hd << " block "
                                                        << block_keys << " nq " << nq << " query " << j
                                                        << " key " << key;
            }
            for (size_t pad = n_keys; pad < stride; ++pad) ASSERT_EQ(-1.0f, scores[j * stride + pad]);
          }
          // One query against one block: the same bits as inside the batch.
          float one[64];
          QueryScoresQ8_0(q.data(), hd, blocks[1], block_keys, scale, one);
          for (int key = 0; key < block_keys; ++key) ASSERT_EQ(scores[block_keys + key], one[key]);
        }
      }
    }
  }
}

// Keys at the ends of the int8 range (-128, which no store writes but a
// page read from elsewhere may hold, and 127) against queries rounded to
// +-127, pairs of one sign: where a saturating int16 step or a sign flip
// of -128 would show. Every level, a decode row's few queries and a
// prefill tile's many, the bits of the stated arithmetic.
TEST(AttentionQ8_0ScoresTest, KeysAtTheEndsOfTheInt8RangeGetTheStatedBitsOnEveryLevel) {
  const int hd = 128, n_keys = 37;
  const size_t rb = KvBytes(KvDtype::kQ8_0, hd), qb = QueryQ8_0Bytes(hd);
  std::vector<uint8_t> kc(n_keys * rb);
  for (int key = 0; key < n_keys; ++key) {
    for (int b = 0; b < hd / 32; ++b) {
      uint8_t* block = kc.data() + key * rb + b * kKvQ8_0BlockBytes;
      const uint16_t d = Fp32ToFp16(0.5f + 0.25f * static_cast<float>((key + b) % 3));
      std::memcpy(block, &d, 2);
      for (int i = 0; i < 32; ++i) {
        const bool low = key % 3 == 0 || (key % 3 == 1 && i % 4 < 2);
        block[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(low ? -128 : 127));
      }
    }
  }
  const std::vector<uint8_t> block = KeyBlock(kc.data(), n_keys, hd, 48);
  const void* blocks[1] = {block.data()};
  for (KernelIsa isa : AllKernelIsas()) {
    if (!KernelIsaSupported(isa)) continue;
    ScopedKernelIsa active(isa);
    for (int nq : {1, 2, 4, 17}) {
      std::vector<float> q(static_cast<size_t>(nq) * hd);
      for (size_t i = 0; i < q.size(); ++i) q[i] = (i / hd) % 2 == 0 ? -1.0f : (i % 8 < 4 ? 1.0f : -1.0f);
      std::vector<uint8_t> rounded(nq * qb);
      for (int j = 0; j < nq; ++j) QuantizeQueryQ8_0(q.data() + j * hd, hd, 0.125f, rounded.data() + j * qb);
      std::vector<float> scores(nq * n_keys);
      ScoresQ8_0(rounded.data(), nq, hd, blocks, 48, n_keys, scores.data(), n_keys);
      for (int j = 0; j < nq; ++j) {
        for (int key = 0; key < n_keys; ++key) {
          ASSERT_EQ(StatedScore(rounded.data() + j * qb, kc.data() + key * rb, hd), scores[j * n_keys + key])
              << KernelIsaName(isa) << " nq " << nq << " query " << j << " key " << key;
        }
      }
    }
  }
}

// Q8_0 caches take heads of whole blocks up to the longest this file
// scores; the server refuses other models at start-up.
TEST(AttentionQ8_0ScoresTest, AQ8_0CacheTakesHeadsOfWholeBlocksUpToTheLongestItScores) {
  EXPECT_TRUE(KvDtypeFitsHeadDim(KvDtype::kQ8_0, 64));
  EXPECT_TRUE(KvDtypeFitsHeadDim(KvDtype::kQ8_0, kQ8_0ScoresMaxHeadDim));
  EXPECT_FALSE(KvDtypeFitsHeadDim(KvDtype::kQ8_0, 48));
  EXPECT_FALSE(KvDtypeFitsHeadDim(KvDtype::kQ8_0, kQ8_0ScoresMaxHeadDim + 32));
  EXPECT_TRUE(KvDtypeFitsHeadDim(KvDtype::kF16, kQ8_0ScoresMaxHeadDim + 32));
}

// The rounding of the query is the only error the integer arithmetic adds:
// a score stays within the bound that rounding allows of the F32 dot
// product of the unrounded query with the key's exact values.
TEST(AttentionQ8_0ScoresTest, AScoreIsTheExactDotProductUpToTheQuerysRounding) {
  const int hd = 128, n_keys = 64;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0, 1);
  const size_t rb = KvBytes(KvDtype::kQ8_0, hd);
  std::vector<float> k(n_keys * hd), q(hd);
  for (float& x : k) x = nd(rng);
  for (float& x : q) x = nd(rng);
  std::vector<uint8_t> kc(n_keys * rb);
  StoreKv(KvDtype::kQ8_0, k.data(), kc.data(), k.size());
  LoadKv(KvDtype::kQ8_0, kc.data(), k.data(), k.size());
  std::vector<float> scores(n_keys);
  const std::vector<uint8_t> block = KeyBlock(kc.data(), n_keys, hd, n_keys);
  QueryScoresQ8_0(q.data(), hd, block.data(), n_keys, 1.0f, scores.data());
  for (int key = 0; key < n_keys; ++key) {
    double exact = 0, bound = 0;
    for (int b = 0; b < hd / 32; ++b) {
      float amax = 0;
      for (int d = 32 * b; d < 32 * b + 32; ++d) amax = std::max(amax, std::fabs(q[d]));
      for (int d = 32 * b; d < 32 * b + 32; ++d) {
        exact += static_cast<double>(q[d]) * k[key * hd + d];
        bound += 0.5 * amax / 127 * std::fabs(k[key * hd + d]);  // half a quant step per value
      }
    }
    EXPECT_NEAR(scores[key], exact, bound * 1.001 + 1e-5) << key;
    EXPECT_GT(std::fabs(scores[key] - exact), 0.0) << "the query was not rounded: key " << key;
  }
}

}  // namespace
}  // namespace kvs
