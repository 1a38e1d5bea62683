// SiluMul and AddInPlace (activation.h) at the AVX2 level: simd_activation.h with
// the vector operations of simd_avx2.h.
#include "kernels/kernel_table.h"
#include "kernels/simd_avx2.h"
#include "kernels/simd_activation.h"

namespace kvs::kernel_table {

void FillAvx2Activation(KernelTable* t) {
  t->silu_mul = SiluMulWith<Avx2>;
  t->add_in_place = AddInPlaceWith<Avx2>;
}

}  // namespace kvs::kernel_table
