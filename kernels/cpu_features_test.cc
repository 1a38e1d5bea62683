#include "kernels/cpu_features.h"

#include <sched.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "kernels/isa_test_util.h"
#include "kernels/kernel_table.h"

namespace kvs {
namespace {

TEST(CpuFeaturesTest, AvailableCoresAreTheProcessesAffinityNotTheMachinesCores) {
  cpu_set_t all, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  EXPECT_EQ(AvailableCores(), CPU_COUNT(&all));
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &all)) {
      CPU_SET(c, &one);
      break;
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);  // as `taskset -c N` would start it
  const int pinned = AvailableCores();
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
  EXPECT_EQ(pinned, 1);
}

TEST(CpuFeaturesTest, NamesRoundTrip) {
  for (KernelIsa isa : AllKernelIsas()) EXPECT_EQ(ParseKernelIsa(KernelIsaName(isa)), isa);
  EXPECT_EQ(ParseKernelIsa("sse2"), std::nullopt);
  EXPECT_EQ(ParseKernelIsa(""), std::nullopt);
}

TEST(CpuFeaturesTest, LevelsFollowTheFeatures) {
  const CpuFeatures& f = DetectedCpuFeatures();
  EXPECT_TRUE(KernelIsaSupported(KernelIsa::kScalar));
  EXPECT_EQ(KernelIsaSupported(KernelIsa::kAvx2), f.avx2 && f.fma && f.f16c);
  if (KernelIsaSupported(KernelIsa::kAvx512)) {
    EXPECT_TRUE(KernelIsaSupported(KernelIsa::kAvx2));
    EXPECT_TRUE(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni);
  }
  EXPECT_TRUE(KernelIsaSupported(BestKernelIsa()));
}

TEST(CpuFeaturesTest, ForcingSwitchesTheActiveLevelAndItsName) {
  const KernelIsa before = ActiveKernelIsa();
  for (KernelIsa isa : AllKernelIsas()) {
    ScopedKernelIsa scoped(isa);
    EXPECT_EQ(scoped.supported(), KernelIsaSupported(isa));
    if (scoped.supported()) {
      EXPECT_EQ(ActiveKernelIsa(), isa);
      const bool amx = kernel_table::KernelTableFor(isa).amx;
      const bool bf16 = isa == KernelIsa::kAvx512 && DetectedCpuFeatures().avx512bf16;
      EXPECT_EQ(std::string(ActiveKernelsName()),
                std::string(KernelIsaName(isa)) + (amx ? "+amx" : "") + (bf16 ? "+bf16" : ""));
    } else {
      EXPECT_EQ(ActiveKernelIsa(), before);
    }
  }
  EXPECT_EQ(ActiveKernelIsa(), before);
}

// Run by the kernels_avx512_without_bf16 test with KVS_AVX512_BF16=0
// (skipped in a process started without it).
TEST(CpuFeaturesTest, KvsAvx512Bf16ZeroRunsTheAvx512LevelWithoutBf16) {
  const char* env = std::getenv("KVS_AVX512_BF16");
  if (env == nullptr || std::string(env) != "0") GTEST_SKIP() << "needs KVS_AVX512_BF16=0";
  EXPECT_FALSE(DetectedCpuFeatures().avx512bf16);
  ScopedKernelIsa avx512(KernelIsa::kAvx512);
  if (!avx512.supported()) GTEST_SKIP() << "no AVX-512 VNNI here";
  EXPECT_EQ(std::string(ActiveKernelsName()).find("bf16"), std::string::npos);
  // The AMX attention converts with AVX512-BF16 instructions: without them
  // it cannot be chosen.
  EXPECT_FALSE(UseAmxAttention(true));
  EXPECT_FALSE(AttentionUsesAmx(KvDtype::kBF16, 128));
  // The level's q8_0 values need only AVX512-VNNI: int16 groups still.
  EXPECT_TRUE(Q8_0ValuesInInt16Groups(128));
}

}  // namespace
}  // namespace kvs
