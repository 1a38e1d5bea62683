// The choice of the AMX attention (attention.h UseAmxAttention): which
// caches and heads the AVX-512 level then folds on AMX (attention_amx.h),
// on a CPU with AMX-BF16; skipped elsewhere. What the AMX kernels compute
// is held to the scalar reference, and to their own bits across tiles,
// chunks and runs, by the attention tests of every level, which the
// kernels_amx_attention test runs with KVS_AMX_ATTENTION=1.
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "kernels/attention_amx.h"
#include "kernels/isa_test_util.h"

namespace kvs {
namespace {

TEST(AmxAttentionTest, ChosenItFoldsBf16AndQ8_0CachesWithHeadsOfThirtyTwosOnTheAvx512Level) {
  ScopedAmxAttention amx(true);
  if (!amx.supported()) GTEST_SKIP() << "no AMX-BF16 here (or KVS_AMX=0, KVS_AVX512_BF16=0)";
  ScopedKernelIsa avx512(KernelIsa::kAvx512);
  for (KvDtype dtype : {KvDtype::kBF16, KvDtype::kQ8_0}) {
    for (int head_dim : {32, 64, 96, 128, 256}) {
      EXPECT_TRUE(AttentionUsesAmx(dtype, head_dim)) << KvDtypeName(dtype) << " " << head_dim;
    }
    for (int head_dim : {16, 40, 80, 512}) {
      EXPECT_FALSE(AttentionUsesAmx(dtype, head_dim)) << KvDtypeName(dtype) << " " << head_dim;
    }
  }
  // F32 and F16 caches keep the vector kernels' F32 products.
  EXPECT_FALSE(AttentionUsesAmx(KvDtype::kF32, 128));
  EXPECT_FALSE(AttentionUsesAmx(KvDtype::kF16, 128));
}

TEST(AmxAttentionTest, NotChosenTheVectorKernelsFoldEveryCache) {
  ScopedAmxAttention vector(false);
  ScopedKernelIsa avx512(KernelIsa::kAvx512);
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16, KvDtype::kQ8_0}) {
    EXPECT_FALSE(AttentionUsesAmx(dtype, 128)) << KvDtypeName(dtype);
  }
}

TEST(AmxAttentionTest, OtherLevelsNeverUseAmx) {
  ScopedAmxAttention amx(true);
  for (KernelIsa isa : {KernelIsa::kScalar, KernelIsa::kAvx2}) {
    ScopedKernelIsa active(isa);
    if (!active.supported()) continue;
    EXPECT_FALSE(AttentionUsesAmx(KvDtype::kBF16, 128)) << KernelIsaName(isa);
  }
}

// Run by the kernels_amx_attention test with KVS_AMX_ATTENTION=1 (skipped
// in a process started without it).
TEST(AmxAttentionTest, KvsAmxAttentionOneStartsTheProcessWithAmxWhereTheCpuHasIt) {
  const char* env = std::getenv("KVS_AMX_ATTENTION");
  if (env == nullptr || std::string(env) != "1") GTEST_SKIP() << "needs KVS_AMX_ATTENTION=1";
  EXPECT_EQ(AmxAttentionInUse(), AmxAttentionAvailable());
}

}  // namespace
}  // namespace kvs
