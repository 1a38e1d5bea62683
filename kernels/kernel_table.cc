#include "kernels/kernel_table.h"

#include "kernels/attention_amx.h"
#include "kernels/ggml_types.h"
#include "kernels/packed_q8_0.h"

namespace kvs::kernel_table {
namespace {

KernelTable BuildTable(KernelIsa isa) {
  KernelTable t{};
  t.name = KernelIsaName(isa);
  FillScalarMatmul(&t);
  FillScalarMatmulQuantized(&t);
  FillScalarDequantize(&t);
  FillScalarAttention(&t);
  FillScalarPackedQ8_0(&t);
  FillScalarTopLogits(&t);
  FillScalarSoftmaxDenominator(&t);
  FillScalarActivation(&t);
  FillScalarNorm(&t);
  if (isa == KernelIsa::kAvx2) {
    FillAvx2Matmul(&t);
    FillAvx2MatmulQuantized(&t);
    FillAvx2Attention(&t);
    FillAvx2PackedQ8_0(&t);
    FillAvx2TopLogits(&t);
    FillAvx2SoftmaxDenominator(&t);
    FillAvx2Activation(&t);
    FillAvx2Norm(&t);
  } else if (isa == KernelIsa::kAvx512) {
    const bool bf16 = DetectedCpuFeatures().avx512bf16;
    FillAvx512Matmul(&t);
    FillAvx512MatmulQuantized(&t);
    if (bf16) FillAvx512Bf16Matmul(&t);
    FillAvx512Attention(&t);
    FillAvx512PackedQ8_0(&t);
    FillAvx512TopLogits(&t);
    FillAvx512SoftmaxDenominator(&t);
    FillAvx512Activation(&t);
    FillAvx512Norm(&t);
    if (AmxAvailable()) {
      FillAmxPackedQ8_0(&t);
      if (AmxAttentionAvailable()) FillAmxAttention(&t);
      t.name = bf16 ? "avx512+amx+bf16" : "avx512+amx";
    } else if (bf16) {
      t.name = "avx512+bf16";
    }
  }
  return t;
}

struct Tables {
  KernelTable by_isa[3];
  Tables() {
    for (KernelIsa isa : {KernelIsa::kScalar, KernelIsa::kAvx2, KernelIsa::kAvx512}) {
      // Tables for levels the CPU lacks stay scalar: they are never selected.
      by_isa[static_cast<int>(isa)] =
          BuildTable(KernelIsaSupported(isa) ? isa : KernelIsa::kScalar);
    }
  }
};

const Tables& AllTables() {
  static const Tables tables;
  return tables;
}

}  // namespace

int ComputeTypeOf(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return kF32;
    case GgmlType::kF16: return kF16;
    case GgmlType::kBF16: return kBF16;
    case GgmlType::kQ8_0: return kQ8_0;
    case GgmlType::kQ4_0: return kQ4_0;
    case GgmlType::kQ4_K: return kQ4_K;
    case GgmlType::kQ6_K: return kQ6_K;
    default: return -1;
  }
}

const KernelTable& KernelTableFor(KernelIsa isa) {
  return AllTables().by_isa[static_cast<int>(isa)];
}

const KernelTable& ActiveKernelTable() { return KernelTableFor(ActiveKernelIsa()); }

}  // namespace kvs::kernel_table
