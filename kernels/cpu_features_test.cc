#include "kernels/cpu_features.h"

#include <string>

#include "gtest/gtest.h"
#include "kernels/isa_test_util.h"
#include "kernels/kernel_table.h"

namespace kvs {
namespace {

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
      EXPECT_EQ(std::string(ActiveKernelsName()), std::string(KernelIsaName(isa)) + (amx ? "+amx" : ""));
    } else {
      EXPECT_EQ(ActiveKernelIsa(), before);
    }
  }
  EXPECT_EQ(ActiveKernelIsa(), before);
}

}  // namespace
}  // namespace kvs
