#include "kernels/attention.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/fp16.h"
#include "kernels/matmul.h"

namespace kvs {

const char* KvDtypeName(KvDtype t) { return t == KvDtype::kF32 ? "f32" : "f16"; }

void StoreKv(KvDtype dtype, const float* src, void* dst, int64_t n) {
  if (dtype == KvDtype::kF32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  uint16_t* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = Fp32ToFp16(src[i]);
}

void LoadKv(KvDtype dtype, const void* src, float* dst, int64_t n) {
  if (dtype == KvDtype::kF32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  const uint16_t* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(h[i]);
}

size_t AttentionScratchFloats(int block_keys, int head_dim) {
  return static_cast<size_t>(block_keys) * (2 * head_dim + 1);
}

void AttentionInit(int nq, int head_dim, float* max, float* sum, float* acc) {
  for (int i = 0; i < nq; ++i) {
    max[i] = -std::numeric_limits<float>::infinity();
    sum[i] = 0;
  }
  std::memset(acc, 0, sizeof(float) * nq * head_dim);
}

void AttentionUpdate(KvDtype dtype, const float* q, int64_t q_stride, int nq, const void* k,
                     const void* v, int n_keys, int head_dim, const int* visible, float scale,
                     float* max, float* sum, float* acc, float* scratch) {
  int max_visible = 0;
  for (int i = 0; i < nq; ++i) max_visible = visible[i] > max_visible ? visible[i] : max_visible;
  if (max_visible > n_keys) max_visible = n_keys;
  if (max_visible == 0) return;

  // Convert the visible part of the block once for all queries of the group.
  const float* kf;
  const float* vf;
  float* scores = scratch;
  if (dtype == KvDtype::kF32) {
    kf = static_cast<const float*>(k);
    vf = static_cast<const float*>(v);
  } else {
    float* kbuf = scratch + n_keys;
    float* vbuf = kbuf + static_cast<size_t>(n_keys) * head_dim;
    LoadKv(dtype, k, kbuf, static_cast<int64_t>(max_visible) * head_dim);
    LoadKv(dtype, v, vbuf, static_cast<int64_t>(max_visible) * head_dim);
    kf = kbuf;
    vf = vbuf;
  }

  for (int i = 0; i < nq; ++i) {
    const int n = visible[i] < n_keys ? visible[i] : n_keys;
    if (n <= 0) continue;
    const float* qi = q + i * q_stride;
    float block_max = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < n; ++j) {
      scores[j] = scale * DotF32(qi, kf + static_cast<size_t>(j) * head_dim, head_dim);
      block_max = scores[j] > block_max ? scores[j] : block_max;
    }
    const float new_max = block_max > max[i] ? block_max : max[i];
    const float correction = std::exp(max[i] - new_max);  // exp(-inf) = 0 on the first block
    float* acc_i = acc + static_cast<size_t>(i) * head_dim;
    float block_sum = 0;
    for (int d = 0; d < head_dim; ++d) acc_i[d] *= correction;
    for (int j = 0; j < n; ++j) {
      const float p = std::exp(scores[j] - new_max);
      block_sum += p;
      const float* vj = vf + static_cast<size_t>(j) * head_dim;
      for (int d = 0; d < head_dim; ++d) acc_i[d] += p * vj[d];
    }
    sum[i] = sum[i] * correction + block_sum;
    max[i] = new_max;
  }
}

void AttentionFinish(int nq, int head_dim, const float* sum, const float* acc, float* out,
                     int64_t out_stride) {
  for (int i = 0; i < nq; ++i) {
    const float inv = sum[i] > 0 ? 1.0f / sum[i] : 0.0f;
    for (int d = 0; d < head_dim; ++d) out[i * out_stride + d] = acc[i * head_dim + d] * inv;
  }
}

}  // namespace kvs
