#include "model/key_rotation.h"

#include "absl/base/internal/raw_logging.h"
#include "kernels/attention.h"

namespace kvs {

KeyRotation::KeyRotation(const ModelConfig& config, const ModelWeights& weights)
    : n_layers_(config.n_layers),
      n_kv_heads_(config.n_kv_heads),
      head_dim_(config.head_dim),
      rope_dim_(config.rope_dim),
      style_(config.rope_style),
      inv_freq_(weights.rope_inv_freq) {}

void KeyRotation::RotateSlots(const KvGeometry& g, uint8_t* page, int first_slot, int end_slot,
                              int64_t delta) const {
  ABSL_RAW_CHECK(g.n_layers == n_layers_ && g.n_kv_heads == n_kv_heads_ && g.head_dim == head_dim_,
                 "KeyRotation: the page geometry is not this model's");
  ABSL_RAW_CHECK(0 <= first_slot && first_slot <= end_slot && end_slot <= g.page_tokens,
                 "KeyRotation: slots out of range");
  const int n_slots = end_slot - first_slot;
  if (n_slots == 0 || delta == 0) return;
  std::vector<float> cos_sin(static_cast<size_t>(rope_dim_));
  RopeAngles(delta, inv_freq_.data(), rope_dim_, cos_sin.data());
  const int64_t n = static_cast<int64_t>(n_slots) * head_dim_;
  std::vector<float> keys(static_cast<size_t>(n));
  for (int layer = 0; layer < n_layers_; ++layer) {
    for (int head = 0; head < n_kv_heads_; ++head) {
      // The block's slots are contiguous: one "head" per slot.
      uint8_t* block = page + g.block_offset(layer, KvPart::kKey, head) + g.slot_offset(first_slot);
      LoadKv(g.dtype, block, keys.data(), n);
      RopeApply(style_, keys.data(), n_slots, head_dim_, rope_dim_, cos_sin.data());
      StoreKv(g.dtype, keys.data(), block, n);
    }
  }
}

}  // namespace kvs
