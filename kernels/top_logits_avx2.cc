// Argmax, TopK and LogitsAbove (top_logits.h) at the AVX2 level: simd_top_logits.h
// over the Avx2 traits.
#include "kernels/kernel_table.h"
#include "kernels/simd_avx2.h"
#include "kernels/simd_top_logits.h"

namespace kvs::kernel_table {

void FillAvx2TopLogits(KernelTable* t) {
  t->argmax = ArgmaxSimd<Avx2>;
  t->top_k = TopKSimd<Avx2>;
  t->logits_above = LogitsAboveSimd<Avx2>;
}

}  // namespace kvs::kernel_table
