// Dequantization: one row of a weight tensor in any supported ggml type to
// F32 (the embedding lookup path). Runs the active kernels' version
// (cpu_features.h); every version gives the same bits as the scalar
// reference in dequantize.cc, the ground truth the SIMD kernels are tested
// against.
#ifndef KVSESSION_KERNELS_DEQUANTIZE_H_
#define KVSESSION_KERNELS_DEQUANTIZE_H_

#include <cstdint>

#include "kernels/ggml_types.h"

namespace kvs {

// True for the weight types the kernels compute with: F32, F16, BF16, Q8_0,
// Q4_0, Q4_K, Q6_K.
bool IsComputeType(GgmlType type);

// Writes the n values of `row` (n a multiple of the type's block size) to
// `out`. `type` must satisfy IsComputeType.
void DequantizeRow(GgmlType type, const void* row, float* out, int64_t n);

}  // namespace kvs

#endif  // KVSESSION_KERNELS_DEQUANTIZE_H_
