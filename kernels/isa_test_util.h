// Test helpers for running the same check under every kernel level the CPU
// supports (cpu_features.h).
#ifndef KVSESSION_KERNELS_ISA_TEST_UTIL_H_
#define KVSESSION_KERNELS_ISA_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "gtest/gtest.h"
#include "kernels/ggml_types.h"

namespace kvs {

// Makes `isa` the active level for the scope, restoring the previous one.
class ScopedKernelIsa {
 public:
  explicit ScopedKernelIsa(KernelIsa isa) : previous_(ActiveKernelIsa()) {
    supported_ = ForceKernelIsa(isa);
  }
  ~ScopedKernelIsa() { ForceKernelIsa(previous_); }
  ScopedKernelIsa(const ScopedKernelIsa&) = delete;
  ScopedKernelIsa& operator=(const ScopedKernelIsa&) = delete;

  bool supported() const { return supported_; }

 private:
  KernelIsa previous_;
  bool supported_ = false;
};

// The fixture of a test parameterized by kernel level: skips a level the
// CPU does not have.
class KernelIsaTest : public ::testing::TestWithParam<KernelIsa> {
 protected:
  void SetUp() override {
    if (!KernelIsaSupported(GetParam())) GTEST_SKIP() << KernelIsaName(GetParam()) << " not supported here";
  }
};

inline const std::vector<KernelIsa>& AllKernelIsas() {
  static const std::vector<KernelIsa> isas = {KernelIsa::kScalar, KernelIsa::kAvx2,
                                              KernelIsa::kAvx512};
  return isas;
}

// Chooses the AMX attention (attention.h UseAmxAttention) for the scope,
// restoring the previous choice; supported() is false where the CPU has no
// AMX-BF16 (nothing changes then).
class ScopedAmxAttention {
 public:
  explicit ScopedAmxAttention(bool on) : previous_(AmxAttentionInUse()) { supported_ = UseAmxAttention(on); }
  ~ScopedAmxAttention() { UseAmxAttention(previous_); }
  ScopedAmxAttention(const ScopedAmxAttention&) = delete;
  ScopedAmxAttention& operator=(const ScopedAmxAttention&) = delete;

  bool supported() const { return supported_; }

 private:
  bool previous_;
  bool supported_ = false;
};

inline const std::vector<GgmlType>& AllComputeTypes() {
  static const std::vector<GgmlType> types = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16,
                                              GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K,
                                              GgmlType::kQ6_K};
  return types;
}

// Column counts that cover one block, odd block counts, many blocks and,
// for plain types, tails shorter than a vector.
inline std::vector<int64_t> TestColumnSizes(GgmlType type) {
  switch (GgmlTraits(static_cast<uint32_t>(type)).block_elems) {
    case 1: return {1, 7, 16, 37, 100, 512, 1029};
    case 32: return {32, 96, 512, 1056};
    default: return {256, 768, 2048};
  }
}

// Bytes of one row of `cols` values of `type`.
inline size_t RowBytes(GgmlType type, int64_t cols) {
  const GgmlTypeTraits t = GgmlTraits(static_cast<uint32_t>(type));
  return static_cast<size_t>(cols / t.block_elems * t.block_bytes);
}

inline bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

inline std::string TypeName(GgmlType t) { return GgmlTypeName(static_cast<uint32_t>(t)); }

}  // namespace kvs

#endif  // KVSESSION_KERNELS_ISA_TEST_UTIL_H_
