#include "kernels/activation.h"

#include <cmath>

#include "kernels/kernel_table.h"

namespace kvs {
namespace {

// The scalar level's SiLU, with libm's expf.
void SiluMulScalar(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void AddInPlaceScalar(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace

void SiluMul(float* gate, const float* up, int64_t n) { kernel_table::ActiveKernelTable().silu_mul(gate, up, n); }

void AddInPlace(float* x, const float* y, int64_t n) { kernel_table::ActiveKernelTable().add_in_place(x, y, n); }

namespace kernel_table {

void FillScalarActivation(KernelTable* t) {
  t->silu_mul = SiluMulScalar;
  t->add_in_place = AddInPlaceScalar;
}

}  // namespace kernel_table
}  // namespace kvs
