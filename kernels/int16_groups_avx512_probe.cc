// Compiled with the AVX-512 flags (kernels/CMakeLists.txt), into
// kernels_test only: see int16_groups_avx512_probe.h.
#include "kernels/int16_groups_avx512_probe.h"

#include "kernels/simd_avx512_int16_groups.h"

namespace kvs::int16_groups_probe {

using V = Avx512Int16Groups;
static_assert(V::ChunkWeights(4) == kChunkWeights, "a chunk's weights for four blocks");

void ScaleGroupScales(float (*scales)[16], int n, float* steps) {
  V::F s[4];
  for (int b = 0; b < n; ++b) s[b] = V::Load(scales[b]);
  V::ScaleGroupScales(s, n, steps);
  for (int b = 0; b < n; ++b) V::Store(scales[b], s[b]);
}

void StoreGroupWeights(const float (*p)[16], int nq, int blocks, const float (*scaled)[16],
                       const float* scale_steps, int16_t (*w)[kChunkWeights], float (*steps)[4]) {
  V::F pv[4];
  int16_t* ws[4];
  float* ss[4];
  for (int q = 0; q < nq; ++q) {
    pv[q] = V::Load(p[q]);
    ws[q] = w[q];
    ss[q] = steps[q];
  }
  if (blocks == 2) {
    V::StoreGroupWeights<2>(pv, nq, scaled, scale_steps, ws, ss);
  } else {
    V::StoreGroupWeights<4>(pv, nq, scaled, scale_steps, ws, ss);
  }
}

int WeightIndex(int b, int t) { return V::WeightIndex(b, t); }

}  // namespace kvs::int16_groups_probe
