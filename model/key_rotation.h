// KeyRotation: turns the cached keys of a KV page by a position delta, the
// kernel of context shifting (SLIDE, model/kv_slide.h).
//
// RoPE turns pair i of a key at position p by angle p * inv_freq[i], and
// rotations compose: R(p + delta) = R(delta) R(p). So a key cached at
// position p becomes the key the model would have cached at p + delta by
// one more rotation by delta, without the pre-RoPE key. The rotation uses
// the model's own RoPE (kernels/rope.h: its style, rope_dim and inv_freq,
// which already hold rope_freq_base, linear rope_scale and rope_freqs
// factors), in f32, for either KV dtype: an f16 page is widened, turned and
// rounded back once (so a turned key differs from the directly computed one
// by f16 rounding only). Values are untouched (RoPE applies to Q and K).
//
// Thread safety: immutable after construction; Rotate may run concurrently
// on different pages. Borrows nothing: the config's shape and the
// frequencies are copied.
#ifndef KVSESSION_MODEL_KEY_ROTATION_H_
#define KVSESSION_MODEL_KEY_ROTATION_H_

#include <cstdint>
#include <vector>

#include "cache/kv_geometry.h"
#include "kernels/rope.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace kvs {

class KeyRotation {
 public:
  KeyRotation(const ModelConfig& config, const ModelWeights& weights);

  // Turns the keys in slots [0, n_slots) of every (layer, kv_head) block of
  // `page` (laid out as `geometry`, kv_geometry.h) by `delta` positions
  // (negative: towards the start). Requires the geometry to be this
  // model's (layers, KV heads, head_dim) and 0 <= n_slots <= page_tokens.
  void Rotate(const KvGeometry& geometry, uint8_t* page, int n_slots, int64_t delta) const {
    RotateSlots(geometry, page, 0, n_slots, delta);
  }
  // The same for slots [first_slot, end_slot) only (a page repacked by a
  // slide holds kept keys before the moved ones). Requires
  // 0 <= first_slot <= end_slot <= page_tokens.
  void RotateSlots(const KvGeometry& geometry, uint8_t* page, int first_slot, int end_slot,
                   int64_t delta) const;

 private:
  int n_layers_;
  int n_kv_heads_;
  int head_dim_;
  int rope_dim_;
  RopeStyle style_;
  std::vector<float> inv_freq_;
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_KEY_ROTATION_H_
