// Tile sizes of the tiled attention kernel (simd_attention_tiled.h), which
// the scratch sizes of attention.h account for.
#ifndef KVSESSION_KERNELS_ATTENTION_TILE_H_
#define KVSESSION_KERNELS_ATTENTION_TILE_H_

#include <cstddef>

namespace kvs {

// Queries (rows x heads of one GQA group) that share each K and V load.
inline constexpr int kAttentionTileQueries = 32;
// Calls with fewer queries (a decode row of a model without GQA) take the
// per-query kernel; a decode row's GQA group (2 or more query heads) is a
// tile, so each K and V vector is loaded and converted once for the group.
inline constexpr int kAttentionTileMinQueries = 2;
// Floats of the partial dot vectors of one tile (kAttentionTileQueries x
// 16 keys x 16 lanes at most), plus a vector's worth for alignment.
inline constexpr size_t kAttentionTilePartFloats = kAttentionTileQueries * 16 * 16 + 16;

// Floats of scratch the tiled kernel needs for calls of up to max_keys keys.
inline constexpr size_t AttentionTileScratchFloats(int max_keys) {
  return kAttentionTilePartFloats + static_cast<size_t>(kAttentionTileQueries) * max_keys;
}

}  // namespace kvs

#endif  // KVSESSION_KERNELS_ATTENTION_TILE_H_
