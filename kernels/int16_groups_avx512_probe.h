// Test access to the AVX-512 level's int16-group operations
// (simd_avx512_int16_groups.h: Avx512Int16Groups::ScaleGroupScales,
// StoreGroupWeights, WeightIndex) on plain arrays, so a test compiled for
// any x86-64 can hold them to the scalar model of attention_q8_0_values.h
// (Q8_0GroupScales, Q8_0GroupWeights) directly, edge cases included.
//
// Defined in int16_groups_avx512_probe.cc, compiled with the AVX-512 flags
// into the kernels' test binary only. Call only where
// KernelIsaSupported(KernelIsa::kAvx512).
#ifndef KVSESSION_KERNELS_INT16_GROUPS_AVX512_PROBE_H_
#define KVSESSION_KERNELS_INT16_GROUPS_AVX512_PROBE_H_

#include <cstdint>

namespace kvs::int16_groups_probe {

// Weights a query's chunk holds for up to four value blocks.
inline constexpr int kChunkWeights = 64;

// scales[b] (16 keys' scales of block b, zero past the group's keys) for
// b < n <= 4 become the scaled scales; steps[b] each block's step.
void ScaleGroupScales(float (*scales)[16], int n, float* steps);

// The int16 weights of nq <= 4 queries (p[q]: 16 probabilities, zero past
// the group's keys) for `blocks` (2 or 4) value blocks of scaled scales
// and their steps (ScaleGroupScales): query q's weights to w[q] (at
// WeightIndex), block b's step to steps[q][b].
void StoreGroupWeights(const float (*p)[16], int nq, int blocks, const float (*scaled)[16],
                       const float* scale_steps, int16_t (*w)[kChunkWeights], float (*steps)[4]);

// Where key t's weight of value block b sits in a query's chunk weights.
int WeightIndex(int b, int t);

}  // namespace kvs::int16_groups_probe

#endif  // KVSESSION_KERNELS_INT16_GROUPS_AVX512_PROBE_H_
