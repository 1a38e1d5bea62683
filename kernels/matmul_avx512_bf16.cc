// The BF16 fast path with AVX512-BF16: weights and activations (rounded to
// BF16 by QuantizeActivations) multiplied by vdpbf16ps, 32 values per
// instruction into one 16-lane F32 accumulator per (weight row, activation
// row): exact BF16 products, F32 sums with denormals flushed to zero.
// Compiled with -mavx512bf16 in a file of its own so no other kernel can
// pick up BF16 instructions; used only when the CPU has AVX512-BF16.
#include "kernels/kernel_table.h"
#include "kernels/simd_avx512.h"
#include "kernels/simd_matmul.h"

namespace kvs {
namespace {

struct Bf16DotKernel {
  static constexpr int kGemvRows = 4;
  static constexpr int kGemmRows = 4;
  static constexpr int kGemmCols = 4;
  static constexpr int kStep = 32;

  static int64_t Steps(int64_t cols) { return (cols + kStep - 1) / kStep; }

  template <int R, int C>
  static void Step(const uint8_t* const* w, const QuantizedActRow* x, int64_t s, int64_t cols,
                   __m512 (&acc)[R][C]) {
    const int64_t k = s * kStep;
    const int64_t left = cols - k;
    const __mmask32 mask = left >= kStep ? ~__mmask32{0} : static_cast<__mmask32>((1u << left) - 1);
    __m512i wv[R];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      wv[i] = _mm512_maskz_loadu_epi16(mask, reinterpret_cast<const uint16_t*>(w[i]) + k);
    }
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) {
      const __m512i xv = _mm512_maskz_loadu_epi16(mask, reinterpret_cast<const uint16_t*>(x[j].q) + k);
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        acc[i][j] = _mm512_dpbf16_ps(acc[i][j], reinterpret_cast<__m512bh&>(wv[i]),
                                     reinterpret_cast<const __m512bh&>(xv));
      }
    }
  }
};

}  // namespace

namespace kernel_table {

void FillAvx512Bf16Matmul(KernelTable* t) {
  t->matmul_quantized[kBF16] = MatmulQuantizedWith<Avx512, Bf16DotKernel>;
}

}  // namespace kernel_table
}  // namespace kvs
