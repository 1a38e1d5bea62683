// Argmax, TopK and LogitsAbove (top_logits.h) at the AVX512 level: simd_top_logits.h
// over the Avx512 traits.
#include "kernels/kernel_table.h"
#include "kernels/simd_avx512.h"
#include "kernels/simd_top_logits.h"

namespace kvs::kernel_table {

void FillAvx512TopLogits(KernelTable* t) {
  t->argmax = ArgmaxSimd<Avx512>;
  t->top_k = TopKSimd<Avx512>;
  t->logits_above = LogitsAboveSimd<Avx512>;
}

}  // namespace kvs::kernel_table
