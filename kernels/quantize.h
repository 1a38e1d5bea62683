// Scalar quantization of F32 rows into ggml block formats (round to
// nearest, per-block absmax scale): F16, BF16, Q8_0 and Q4_0. Used for the
// fast path's activation blocks (Q8_0) and by the model synthesizer.
#ifndef KVSESSION_KERNELS_QUANTIZE_H_
#define KVSESSION_KERNELS_QUANTIZE_H_

#include <cstdint>

#include "kernels/ggml_types.h"

namespace kvs {

// True for the types QuantizeRow can produce.
bool CanQuantize(GgmlType type);

// Writes n values (a multiple of the block size) of `x` as `type` to `out`.
void QuantizeRow(GgmlType type, const float* x, void* out, int64_t n);

}  // namespace kvs

#endif  // KVSESSION_KERNELS_QUANTIZE_H_
