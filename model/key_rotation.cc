#include "model/key_rotation.h"

#include "absl/base/internal/raw_logging.h"
#include "kernels/attention.h"
#include "kernels/q8_0_kv_blocks.h"

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
  // q8_0 keys are packed groups (q8_0_kv_blocks.h): their slots go through
  // Q8_0 rows here.
  const bool packed = g.dtype == KvDtype::kQ8_0;
  std::vector<uint8_t> rows(packed ? static_cast<size_t>(n_slots) * g.row_bytes() : 0);
  for (int layer = 0; layer < n_layers_; ++layer) {
    for (int head = 0; head < n_kv_heads_; ++head) {
      uint8_t* block = page + g.block_offset(layer, KvPart::kKey, head);
      // Otherwise the block's slots are contiguous rows: one "head" per slot.
      uint8_t* slots = packed ? rows.data() : block + g.slot_offset(first_slot);
      if (packed) {
        for (int s = 0; s < n_slots; ++s) {
          LoadQ8_0KeySlot(block, head_dim_, first_slot + s, slots + s * g.row_bytes());
        }
      }
      LoadKv(g.dtype, slots, keys.data(), n);
      RopeApply(style_, keys.data(), n_slots, head_dim_, rope_dim_, cos_sin.data());
      StoreKv(g.dtype, keys.data(), slots, n);
      if (packed) {
        for (int s = 0; s < n_slots; ++s) {
          StoreQ8_0KeySlot(slots + s * g.row_bytes(), head_dim_, first_slot + s, block);
        }
      }
    }
  }
}

}  // namespace kvs
