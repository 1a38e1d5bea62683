// Rotary position embedding, in the two layouts llama.cpp applies:
//   kAdjacent (llama): rotates pairs (x[2i], x[2i+1]);
//   kNeox (qwen2, qwen3): rotates pairs (x[i], x[i + rope_dim/2]).
// Pair i turns by angle pos * inv_freq[i]. Only the first `rope_dim` values
// of each head rotate; the rest pass through.
#ifndef KVSESSION_KERNELS_ROPE_H_
#define KVSESSION_KERNELS_ROPE_H_

#include <cstdint>

namespace kvs {

enum class RopeStyle : uint8_t { kAdjacent = 0, kNeox = 1 };

// cos_sin[2i] = cos(pos * inv_freq[i]), cos_sin[2i+1] = sin(...), for
// i < rope_dim / 2. Computed in double for accuracy at long positions.
void RopeAngles(int64_t pos, const float* inv_freq, int rope_dim, float* cos_sin);

// Rotates `n_heads` heads of `x` (head h starts at x + h * head_dim).
void RopeApply(RopeStyle style, float* x, int n_heads, int head_dim, int rope_dim,
               const float* cos_sin);

}  // namespace kvs

#endif  // KVSESSION_KERNELS_ROPE_H_
