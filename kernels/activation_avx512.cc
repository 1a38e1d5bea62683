// SiluMul and AddInPlace (activation.h) at the AVX-512 level: simd_activation.h with
// the vector operations of simd_avx512.h.
#include "kernels/kernel_table.h"
#include "kernels/simd_avx512.h"
#include "kernels/simd_activation.h"

namespace kvs::kernel_table {

void FillAvx512Activation(KernelTable* t) {
  t->silu_mul = SiluMulWith<Avx512>;
  t->add_in_place = AddInPlaceWith<Avx512>;
}

}  // namespace kvs::kernel_table
