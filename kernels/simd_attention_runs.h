// The tiled kernel for a batch of sequences (AttentionUpdateRuns in
// attention.h): when consecutive runs' leading blocks are the same pages
// (forks of one prompt decoding together), one tile of every run's queries folds
// those blocks, each K and V vector loaded (and converted) once for all of
// them instead of once per run; then each run folds the rest of its own
// blocks.
//
// The bits are those of a call per run: a query's softmax is still one
// step over its whole visible context. Its scores are the same numbers
// wherever they are computed (a key's score depends only on the query and
// the key, block by block: TileScores), written into one score row in key
// order, shared keys then its own; one max, one e^x pass and one rescale
// per query (TileSoftmax); and its acc takes the values key by key in
// order, the shared blocks first, then its own (TileValues). The shared
// blocks are whole and every query sees them whole, so no key group or
// mask is split differently. attention_runs_test checks the bits.
//
// Include only from SIMD translation units, after simd_attention_tiled.h
// (everything is in an anonymous namespace: the ODR rule in
// cpu_features.h).
#ifndef KVSESSION_KERNELS_SIMD_ATTENTION_RUNS_H_
#define KVSESSION_KERNELS_SIMD_ATTENTION_RUNS_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/attention.h"
#include "kernels/attention_run.h"
#include "kernels/attention_tile.h"
#include "kernels/kernel_table.h"
#include "kernels/simd_attention_tiled.h"

namespace kvs {
namespace {

// Queries [s0, s1) of `tile` restricted to keys from `first_key` on: the
// tile a run folds over its own blocks after the shared ones.
inline AttentionTile OwnPartOf(const AttentionTile& tile, int s0, int s1, int first_key) {
  AttentionTile own;
  for (int s = s0; s < s1; ++s) {
    const int o = own.count++;
    own.q[o] = tile.q[s];
    own.n[o] = tile.n[s] - first_key;
    own.state[o] = tile.state[s];
    own.n_max = o == 0 || own.n[o] > own.n_max ? own.n[o] : own.n_max;
    own.n_min = o == 0 || own.n[o] < own.n_min ? own.n[o] : own.n_min;
  }
  return own;
}

// AttentionUpdateRuns with `passes` (VectorTilePasses or the AMX ones)
// when the runs share `shared_blocks` leading blocks
// (AttentionSharedBlocks > 0): every row sees more than shared_blocks *
// block_keys keys.
template <class V, class Passes>
void AttentionRunsTiledWith(Passes& passes, const float* q, int64_t q_row_stride, const AttentionRun* runs,
                            int n_runs, int heads, int block_keys, int shared_blocks, const int* visible, float scale,
                            float* max, float* sum, float* acc, float* scratch) {
  constexpr int hd = Passes::kHeadDim;
  const int shared_keys = shared_blocks * block_keys;
  float* scores = TileScoreRows(scratch);
  // The queries in order (run i, its row r, head h), kAttentionTileQueries
  // to a tile; run_of[s] is tile query s's run.
  int run = 0, run_end = runs[0].rows, row = 0, h = 0;
  auto skip_finished_runs = [&] {
    while (run < n_runs && row == run_end) {
      if (++run < n_runs) run_end += runs[run].rows;
    }
  };
  skip_finished_runs();
  while (run < n_runs) {
    AttentionTile tile;
    int run_of[kAttentionTileQueries];
    for (; run < n_runs && tile.count < kAttentionTileQueries;) {
      const int n = visible[row] < runs[run].n_blocks * block_keys ? visible[row] : runs[run].n_blocks * block_keys;
      const int s = tile.count++;
      tile.q[s] = q + row * q_row_stride + h * hd;
      tile.n[s] = n;
      tile.state[s] = row * heads + h;
      run_of[s] = run;
      tile.n_max = s == 0 || n > tile.n_max ? n : tile.n_max;
      tile.n_min = s == 0 || n < tile.n_min ? n : tile.n_min;
      if (++h == heads) {
        h = 0;
        ++row;
        skip_finished_runs();
      }
    }
    const size_t stride = static_cast<size_t>(tile.n_max);
    // Scores: the shared blocks for the whole tile, then each run's own.
    AttentionTile shared = tile;
    for (int s = 0; s < shared.count; ++s) shared.n[s] = shared_keys;
    shared.n_max = shared.n_min = shared_keys;
    passes.Scores(shared, runs[run_of[0]].k_blocks, block_keys, scale, scores, stride);
    auto for_each_run = [&](auto fold) {  // fold(run, its tile queries [s0, s1))
      for (int s0 = 0; s0 < tile.count;) {
        int s1 = s0 + 1;
        while (s1 < tile.count && run_of[s1] == run_of[s0]) ++s1;
        fold(runs[run_of[s0]], s0, s1);
        s0 = s1;
      }
    };
    for_each_run([&](const AttentionRun& r, int s0, int s1) {
      passes.Scores(OwnPartOf(tile, s0, s1, shared_keys), r.k_blocks + shared_blocks, block_keys, scale,
                    scores + s0 * stride + shared_keys, stride);
    });
    TileSoftmax<V, hd>(tile, scores, stride, max, sum, acc);
    // Values in key order: the shared blocks for the whole tile, then each
    // run's own.
    passes.Values(shared, runs[run_of[0]].v_blocks, block_keys, scores, stride, acc);
    for_each_run([&](const AttentionRun& r, int s0, int s1) {
      passes.Values(OwnPartOf(tile, s0, s1, shared_keys), r.v_blocks + shared_blocks, block_keys,
                    scores + s0 * stride + shared_keys, stride, acc);
    });
  }
}

// AttentionRunsTiledWith for head_dim = kChunks vectors by the vector
// passes.
template <class V, KvDtype kT, int kChunks>
void AttentionRunsTiledFixed(const float* q, int64_t q_row_stride, const AttentionRun* runs, int n_runs,
                             int heads, int block_keys, int shared_blocks, const int* visible, float scale,
                             float* max, float* sum, float* acc, float* scratch) {
  VectorTilePasses<V, kT, kChunks> passes(scratch);
  AttentionRunsTiledWith<V>(passes, q, q_row_stride, runs, n_runs, heads, block_keys, shared_blocks, visible, scale,
                            max, sum, acc, scratch);
}

// AttentionRunsTiled for runs that all start with the same page: the
// shared tile when they share leading blocks and the head fits a
// register-resident size (1, 2, 4, 8 or 16 vectors); otherwise
// AttentionBlocksTiled once per run. The same bits either way.
template <class V>
void AttentionRunsGroup(KvDtype dtype, const float* q, int64_t q_row_stride, const AttentionRun* runs, int n_runs,
                        int heads, int block_keys, int head_dim, const int* visible, float scale, float* max,
                        float* sum, float* acc, float* scratch) {
  const int shared_blocks = AttentionSharedBlocks(runs, n_runs, block_keys, visible);
  if (shared_blocks > 0) {
    auto fits = [&](auto chunks) {
      constexpr int kChunks = decltype(chunks)::value;
      if (head_dim != kChunks * V::kLanes) return false;
      WithKvDtype(dtype, [&](auto t) {
        AttentionRunsTiledFixed<V, decltype(t)::value, kChunks>(q, q_row_stride, runs, n_runs, heads, block_keys,
                                                                shared_blocks, visible, scale, max, sum, acc,
                                                                scratch);
      });
      return true;
    };
    if (fits(std::integral_constant<int, 1>{}) || fits(std::integral_constant<int, 2>{}) ||
        fits(std::integral_constant<int, 4>{}) || fits(std::integral_constant<int, 8>{}) ||
        fits(std::integral_constant<int, 16>{})) {
      return;
    }
  }
  kernel_table::AttentionRunsOneByOne(AttentionBlocksTiled<V>, dtype, q, q_row_stride, runs, n_runs, heads,
                                      block_keys, head_dim, visible, scale, max, sum, acc, scratch);
}

// The table's attention_runs: consecutive runs that start with the same
// page (forks of one prompt, as a batch lists them) go through `Group`
// (AttentionRunsGroup, or the AMX kernels' own: attention_amx.cc)
// together, every other run on its own.
template <class V, kernel_table::AttentionRunsFn Group = AttentionRunsGroup<V>>
void AttentionRunsTiled(KvDtype dtype, const float* q, int64_t q_row_stride, const AttentionRun* runs,
                        int n_runs, int heads, int block_keys, int head_dim, const int* visible, float scale,
                        float* max, float* sum, float* acc, float* scratch) {
  auto first_page = [&](int i) { return runs[i].n_blocks > 0 ? runs[i].k_blocks[0] : nullptr; };
  int row = 0;
  for (int i0 = 0; i0 < n_runs;) {
    int i1 = i0 + 1, rows = runs[i0].rows;
    while (i1 < n_runs && first_page(i0) != nullptr && first_page(i1) == first_page(i0)) rows += runs[i1++].rows;
    const size_t state = static_cast<size_t>(row) * heads;
    Group(dtype, q + row * q_row_stride, q_row_stride, runs + i0, i1 - i0, heads, block_keys, head_dim, visible + row,
          scale, max + state, sum + state, acc + state * head_dim, scratch);
    row += rows;
    i0 = i1;
  }
}

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_SIMD_ATTENTION_RUNS_H_
