// The AMX attention kernels (attention_amx.h states the arithmetic): a
// tile's two passes over the keys as TDPBF16PS products, run by the tiled
// drivers of simd_attention_tiled.h, simd_attention_runs.h and
// simd_attention_heads.h, whose online softmax (TileSoftmax) they share.
// Compiled with the AVX-512, AVX512-BF16 and AMX flags; the table entries
// are set only when AmxBf16Available().
//
// A tile holds up to kAttentionTileQueries = 32 queries, in groups of at
// most 16 (AMX's rows or columns): a tile of n <= 16 queries is one group
// of n, a larger one two groups of 16 (the second's missing queries are
// zeros). Tile shapes follow the group size nq, so a decode row's two
// queries move two rows, not sixteen (ShapesFor: one configuration per
// nq). Per group:
//   scores   S^T[16 keys][3 nq] = K[16 keys][hd] . Q^T: BF16 keys read
//            in place as the A operand, the queries' three BF16 parts
//            the B operand, a column each (QueryTiles, built once per
//            tile); a query's score row is the sum of its three columns.
//   values   O[nq][hd] += W[nq][32 keys] . V[32 keys][hd]: the weights
//            (three BF16 parts, or one per q8_0 value block) the A
//            operand, the values with pairs of keys interleaved as
//            TDPBF16PS reads them the B operand (ValueTiles, converted
//            once per chunk for both groups); O lives in F32 rows
//            (AccRows), loaded and stored around each chunk's products.
// Q8_0 keys are scored by the vector passes' integer kernel (the same bits
// as on the AVX-512 level: attention_q8_0_scores.h).
//
// Each pass loads its own tile shapes (ShapesFor).
//
// <immintrin.h> comes through simd_avx512.h, which silences GCC 12's false
// warnings inside it.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/amx_tiles.h"
#include "kernels/attention.h"
#include "kernels/attention_amx.h"
#include "kernels/kernel_table.h"
#include "kernels/simd_avx512_int16_groups.h"
#include "kernels/simd_attention.h"
#include "kernels/simd_attention_tiled.h"
#include "kernels/simd_attention_heads.h"
#include "kernels/simd_attention_runs.h"

namespace kvs {
namespace {

using V = Avx512Int16Groups;

constexpr int kGroup = 16;        // most queries per group (AMX rows or columns)
constexpr int kScoreKeys = 16;    // keys per score product
constexpr int kChunkKeys = 32;    // keys per value product (its reduction)
constexpr int kSliceValues = 32;  // values of the head per score product
constexpr int kQueryParts = 3;    // BF16 parts of an F32 query or weight

// How a group of nq queries lays out the columns of S^T: each query's
// three parts are columns of their own (each sums k . q_p over the head
// by itself; the score adds the three after). Small groups (3 nq <= 16:
// decode rows) put every column in one tile, so a slice is one product;
// larger ones a tile per part (nq columns each).
struct ScoreColumns {
  int sets;     // C tiles (1 or 3)
  int columns;  // columns per tile
  explicit ScoreColumns(int nq)
      : sets(kQueryParts * nq <= kGroup ? 1 : kQueryParts), columns(kQueryParts * nq / sets) {}
  int Set(int part) const { return sets == 1 ? 0 : part; }
  int Column(int part, int query, int nq) const { return sets == 1 ? part * nq + query : query; }
};

// The tile shapes of each pass for groups of nq queries (1 .. 16).
//   scores  0, 1, 3: S^T, a tile per column set (16 keys x
//           ScoreColumns::columns), 2: a key slice (16 x 32 BF16), 4, 5,
//           6: a query slice per column set (16 value pairs x columns)
//   values  0-3: O (nq x 16 values each: four value slices at a time),
//           4-6: the weights' parts, or two q8_0 value blocks' weights
//           (nq x 32 keys), 7: a value slice (16 key pairs x 16)
struct PassShapes {
  AmxTileConfig scores, values;
};

const PassShapes& ShapesFor(int nq) {
  static const auto shapes = [] {
    struct All {
      PassShapes by_nq[kGroup + 1];
    } all;
    for (int n = 1; n <= kGroup; ++n) {
      auto shape = [](AmxTileConfig& t, int tile, int rows, int bytes) {
        t.rows[tile] = static_cast<uint8_t>(rows);
        t.colsb[tile] = static_cast<uint16_t>(bytes);
      };
      AmxTileConfig& sc = all.by_nq[n].scores;
      const ScoreColumns layout(n);
      for (int t : {0, 1, 3}) shape(sc, t, kScoreKeys, 4 * layout.columns);
      shape(sc, 2, kScoreKeys, 64);
      for (int t : {4, 5, 6}) shape(sc, t, kSliceValues / 2, 4 * layout.columns);
      AmxTileConfig& va = all.by_nq[n].values;
      for (int t = 0; t < 7; ++t) shape(va, t, n, 64);
      shape(va, 7, kChunkKeys / 2, 64);
    }
    return all;
  }();
  return shapes.by_nq[nq];
}

// Queries per group of a tile of `count` queries, and the groups.
inline int GroupSize(int count) { return count < kGroup ? count : kGroup; }
inline int Groups(int count) { return (count + kGroup - 1) / kGroup; }
inline int QueriesIn(int count, int group) {
  return count - group * kGroup < kGroup ? count - group * kGroup : kGroup;
}

// ------------------------------------------------------------ BF16 parts

// BF16 bits (the low 16 words of a 32-word vector, or the high ones) as
// F32.
inline __m512 LowBf16AsF32(__m512i b) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(b)), 16));
}
inline __m512 HighBf16AsF32(__m512i b) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(b, 1)), 16));
}

// 32 F32 values (lo: values 0-15, hi: 16-31) split into kQueryParts BF16
// parts, part p as 32 BF16 words in value order: x = part 0 + part 1 +
// part 2 exactly (attention_amx.h).
inline void SplitBf16(__m512 lo, __m512 hi, __m512i (&parts)[kQueryParts]) {
#pragma GCC unroll 3
  for (int p = 0; p < kQueryParts; ++p) {
    parts[p] = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
    if (p + 1 < kQueryParts) {
      lo = _mm512_sub_ps(lo, LowBf16AsF32(parts[p]));
      hi = _mm512_sub_ps(hi, HighBf16AsF32(parts[p]));
    }
  }
}

// Values [d, d + 32) of key `row` of a value block of type kT (block_keys
// slots of hd values) as 32 BF16 words, exactly: BF16 values as they are
// (rows), Q8_0 values their int8 quants (q8_0_kv_blocks.h; the block's
// scale goes into the weights).
template <KvDtype kT, int hd>
inline __m512i LoadBf16Words(const void* block, int block_keys, int row, int d) {
  if constexpr (kT == KvDtype::kBF16) {
    return _mm512_loadu_si512(static_cast<const uint16_t*>(block) + static_cast<size_t>(row) * hd + d);
  } else {
    const int8_t* q = Q8_0ValueQuants(block, hd, block_keys, row) + d;
    return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(V::LoadI8(q + 16), V::LoadI8(q)));
  }
}

// Words 0-15 of a and b interleaved (a0 b0 a1 b1 ...), and words 16-31.
inline __m512i InterleaveLow(__m512i a, __m512i b) {
  const __m512i index = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                         37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  return _mm512_permutex2var_epi16(a, index, b);
}
inline __m512i InterleaveHigh(__m512i a, __m512i b) {
  const __m512i index = _mm512_set_epi16(63, 31, 62, 30, 61, 29, 60, 28, 59, 27, 58, 26, 57, 25, 56, 24, 55, 23, 54,
                                         22, 53, 21, 52, 20, 51, 19, 50, 18, 49, 17, 48, 16);
  return _mm512_permutex2var_epi16(a, index, b);
}

// out[c][r] = in[r][c] for a 16 x 16 F32 block (rows 64 bytes apart).
inline void Transpose16x16(const float* in, __m512 (&out)[16]) {
  __m512 rows[16];
  for (int r = 0; r < 16; ++r) rows[r] = _mm512_load_ps(in + 16 * r);
  V::Transpose16x16(rows, out);
}

// ------------------------------------------------------------ operands

// The queries of a tile as B operands of the score products: for group g,
// slice s (values [32 s, 32 s + 32) of the head) and column set t, 16 rows
// (value pairs) of ScoreColumns::columns columns x 2 BF16, rows 4 columns
// bytes apart; zeros for a group's missing queries.
template <int hd>
struct QueryTiles {
  static constexpr int kSlices = hd / kSliceValues;
  alignas(64) uint16_t tile[2][kSlices][kQueryParts][16 * 2 * kGroup];

  const uint16_t* Of(int group, int slice, int set) const { return tile[group][slice][set]; }

  void Build(const AttentionTile& t) {
    const int nq = GroupSize(t.count);
    const ScoreColumns layout(nq);
    std::memset(tile, 0, sizeof tile[0] * Groups(t.count));
    const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(4 * layout.columns));
    for (int s = 0; s < t.count; ++s) {
      const int g = s / kGroup, i = s % kGroup;
      for (int slice = 0; slice < kSlices; ++slice) {
        __m512i parts[kQueryParts];
        SplitBf16(V::Load(t.q[s] + kSliceValues * slice), V::Load(t.q[s] + kSliceValues * slice + 16), parts);
        // Word pair k of a part (values 2k, 2k + 1) is row k of its column.
        for (int p = 0; p < kQueryParts; ++p) {
          _mm512_i32scatter_epi32(tile[g][slice][layout.Set(p)] + 2 * layout.Column(p, i, nq), rows, parts[p], 1);
        }
      }
    }
  }
};

// Key j of a sequence held in blocks of block_keys keys (v[j /
// block_keys], row j % block_keys): the value pass takes its chunks of 32
// keys across blocks, so a chunk does not depend on the paging.
struct KeyInBlocks {
  const void* block;
  int row;
};
inline KeyInBlocks KeyAt(const void* const* v, int block_keys, int j) {
  return {v[j / block_keys], j % block_keys};
}

// A chunk's values as B operands of the value products: for slice c
// (values [16 c, 16 c + 16) of the head), 16 rows (key pairs) x 16 values
// x 2 BF16 (key 2k's value, key 2k + 1's); zeros past the chunk's keys.
template <KvDtype kT, int hd>
struct ValueTiles {
  static constexpr int kSlices = hd / 16;
  alignas(64) uint16_t tile[kSlices][16 * 32];

  // Keys [j0, j0 + count) of the sequence in blocks `v` of block_keys
  // keys, which may span blocks; prefetch.AtBlock(b) as the first key of
  // block b is read, and a Step of `lines` per pair of keys.
  void Load(const void* const* v, int block_keys, int j0, int count, BlockPrefetch& prefetch, int lines) {
    const __m512i zero = _mm512_setzero_si512();
    int block = j0 / block_keys, row = j0 % block_keys;  // the next key's place, advanced key by key
    auto next_key = [&] {
      if (row == 0) prefetch.AtBlock(block);
      const KeyInBlocks key{v[block], row};
      if (++row == block_keys) {
        row = 0;
        ++block;
      }
      return key;
    };
    for (int k = 0; k < kChunkKeys / 2; ++k) {
      const int a = 2 * k, b = 2 * k + 1;
      if (a >= count) {  // past the chunk's keys: zero pairs
        for (int d = 0; d < hd; d += 32) {
          _mm512_store_si512(tile[d / 16] + 32 * k, zero);
          _mm512_store_si512(tile[d / 16 + 1] + 32 * k, zero);
        }
        continue;
      }
      const KeyInBlocks ka = next_key();
      const KeyInBlocks kb = b < count ? next_key() : ka;
      prefetch.Step(lines);
      for (int d = 0; d < hd; d += 32) {
        const __m512i wa = LoadBf16Words<kT, hd>(ka.block, block_keys, ka.row, d);
        const __m512i wb = b < count ? LoadBf16Words<kT, hd>(kb.block, block_keys, kb.row, d) : zero;
        _mm512_store_si512(tile[d / 16] + 32 * k, InterleaveLow(wa, wb));
        _mm512_store_si512(tile[d / 16 + 1] + 32 * k, InterleaveHigh(wa, wb));
      }
    }
  }
};

// The accumulators of a group's queries as nq contiguous F32 rows (rows
// past the group's queries zero), loaded from and stored back to the
// state's acc rows.
template <int hd>
struct AccRows {
  alignas(64) float rows[kGroup * hd];

  void Gather(const AttentionTile& t, int group, const float* acc) {
    const int n = QueriesIn(t.count, group), nq = GroupSize(t.count);
    for (int i = 0; i < n; ++i) {
      std::memcpy(rows + i * hd, acc + static_cast<size_t>(t.state[group * kGroup + i]) * hd, sizeof(float) * hd);
    }
    if (n < nq) std::memset(rows + n * hd, 0, sizeof(float) * (nq - n) * hd);
  }
  void Scatter(const AttentionTile& t, int group, float* acc) const {
    for (int i = 0; i < QueriesIn(t.count, group); ++i) {
      std::memcpy(acc + static_cast<size_t>(t.state[group * kGroup + i]) * hd, rows + i * hd, sizeof(float) * hd);
    }
  }
};

// ------------------------------------------------------------ the passes

// The passes of attention_amx.h for a cache of type kT (BF16 or Q8_0) and
// heads of hd values (VectorTilePasses' interface). One object per call.
template <KvDtype kT, int hd>
class AmxTilePasses {
 public:
  static constexpr int kHeadDim = hd;

  explicit AmxTilePasses(float* /*scratch: the drivers' score rows only*/) {}

  void Scores(const AttentionTile& tile, const void* const* k, int block_keys, float scale, float* scores,
              size_t stride) {
    if constexpr (kT == KvDtype::kQ8_0) {  // exact integers, the AVX-512 level's bits
      TileScores<V, kT, hd / V::kLanes>(tile, k, block_keys, scale, scores, stride, nullptr, nullptr);
    } else {
      ScoresBf16(tile, k, block_keys, scale, scores, stride);
    }
  }

  // The chunks are the keys [32 c, 32 c + 32) of the sequence `v` holds,
  // whoever calls and however it is paged (a chunk may span blocks), so
  // the bits do not depend on block_keys; a query's weight for a key it
  // does not see is 0. Callers that fold a sequence in parts (the runs'
  // shared blocks, then each run's own) start every part at a multiple of
  // kChunkKeys.
  void Values(const AttentionTile& tile, const void* const* v, int block_keys, const float* weights, size_t stride,
              float* acc) {
    const int nq = GroupSize(tile.count), groups = Groups(tile.count);
    UseAmxTileConfig(ShapesFor(nq).values);
    for (int g = 0; g < groups; ++g) acc_[g].Gather(tile, g, acc);
    const size_t block_bytes = static_cast<size_t>(block_keys) * RowBytes<kT>(hd);
    const int used_blocks = (tile.n_max + block_keys - 1) / block_keys;
    BlockPrefetch prefetch(v, used_blocks, block_bytes, StreamsBlocks(tile.count));
    // A prefetch Step per key pair the conversion reads.
    const int lines = prefetch.LinesPerStep((block_keys + 1) / 2);
    for (int j0 = 0; j0 < tile.n_max; j0 += kChunkKeys) {
      const int count = tile.n_max - j0 < kChunkKeys ? tile.n_max - j0 : kChunkKeys;
      values_.Load(v, block_keys, j0, count, prefetch, lines);
      if constexpr (kT == KvDtype::kQ8_0) ChunkScales(v, block_keys, j0, count);
      for (int g = 0; g < groups; ++g) {
        ChunkWeights(tile, g, nq, j0, count, weights, stride);
        StoresBeforeTileLoads();  // the values, the weights and the gathered acc rows
        ChunkProducts(g);
      }
    }
    for (int g = 0; g < groups; ++g) acc_[g].Scatter(tile, g, acc);
  }

 private:
  static constexpr int kValueBlocks = hd / kKvQ8_0BlockValues;  // q8_0 scales per value row
  static constexpr int kWeightTiles = kT == KvDtype::kQ8_0 ? kValueBlocks : kQueryParts;

  // BF16 keys: S^T of each group, slice by slice, a column per query
  // part (ScoreColumns), C_p += k . q_p; then score = scale * ((C_1 +
  // C_2) + C_3).
  void ScoresBf16(const AttentionTile& tile, const void* const* k, int block_keys, float scale, float* scores,
                  size_t stride) {
    const int nq = GroupSize(tile.count), groups = Groups(tile.count);
    const ScoreColumns layout(nq);
    UseAmxTileConfig(ShapesFor(nq).scores);
    query_.Build(tile);
    StoresBeforeTileLoads();
    const size_t row_bytes = RowBytes<kT>(hd);
    const size_t block_bytes = static_cast<size_t>(block_keys) * row_bytes;
    const int used_blocks = (tile.n_max + block_keys - 1) / block_keys;
    BlockPrefetch prefetch(k, used_blocks, block_bytes, StreamsBlocks(tile.count));
    // A prefetch Step per key slice read.
    const int lines = prefetch.LinesPerStep((block_keys + kScoreKeys - 1) / kScoreKeys * (hd / kSliceValues));
    const int ld = 4 * layout.columns;  // bytes per row of a C or B tile
    alignas(64) float st[kQueryParts][kScoreKeys * kGroup];  // S^T per column set: [key][column]
    alignas(64) uint16_t padded[kScoreKeys * hd];  // a block's last keys, zero-padded
    const __m512i key_rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                                _mm512_set1_epi32(layout.columns));
    for (int b = 0; b < used_blocks; ++b) {
      prefetch.AtBlock(b);
      const int first = b * block_keys;
      const int nb = tile.n_max - first < block_keys ? tile.n_max - first : block_keys;
      for (int j = 0; j < nb; j += kScoreKeys) {
        const int count = nb - j < kScoreKeys ? nb - j : kScoreKeys;
        const uint16_t* keys = static_cast<const uint16_t*>(k[b]) + static_cast<size_t>(j) * hd;
        if (count < kScoreKeys) {  // rows past the block's keys read as zeros
          std::memcpy(padded, keys, count * row_bytes);
          std::memset(padded + count * hd, 0, (kScoreKeys - count) * row_bytes);
          StoresBeforeTileLoads();
          keys = padded;
        }
        for (int g = 0; g < groups; ++g) {
          _tile_zero(0);
          if (layout.sets > 1) {
            _tile_zero(1);
            _tile_zero(3);
          }
          for (int slice = 0; slice < hd / kSliceValues; ++slice) {
            if (g == 0) prefetch.Step(lines);
            _tile_loadd(2, keys + kSliceValues * slice, row_bytes);
            _tile_loadd(4, query_.Of(g, slice, 0), ld);
            _tile_dpbf16ps(0, 2, 4);
            if (layout.sets > 1) {
              _tile_loadd(5, query_.Of(g, slice, 1), ld);
              _tile_dpbf16ps(1, 2, 5);
              _tile_loadd(6, query_.Of(g, slice, 2), ld);
              _tile_dpbf16ps(3, 2, 6);
            }
          }
          _tile_stored(0, st[0], ld);
          const int n = QueriesIn(tile.count, g);
          float* row = scores + static_cast<size_t>(g * kGroup) * stride + first + j;
          if (layout.sets > 1) {  // nq columns per part: add the parts, then each query's column
            _tile_stored(1, st[1], ld);
            _tile_stored(3, st[2], ld);
            if (nq == kGroup) {
              for (int r = 0; r < kScoreKeys; ++r) {
                const __m512 sum =
                    V::Add(V::Add(V::Load(st[0] + 16 * r), V::Load(st[1] + 16 * r)), V::Load(st[2] + 16 * r));
                V::Store(st[0] + 16 * r, sum);
              }
              __m512 by_query[kGroup];
              Transpose16x16(st[0], by_query);
              for (int i = 0; i < n; ++i) V::StorePartial(row + i * stride, V::Mul(by_query[i], V::Set1(scale)), count);
              continue;
            }
            for (int i = 0; i < n; ++i) {
              const __m512i at = _mm512_add_epi32(key_rows, _mm512_set1_epi32(i));
              const __m512 sum = V::Add(V::Add(_mm512_i32gather_ps(at, st[0], 4), _mm512_i32gather_ps(at, st[1], 4)),
                                        _mm512_i32gather_ps(at, st[2], 4));
              V::StorePartial(row + i * stride, V::Mul(sum, V::Set1(scale)), count);
            }
          } else {  // one tile: query i's parts are columns i, nq + i, 2 nq + i
            for (int i = 0; i < n; ++i) {
              const __m512i at = _mm512_add_epi32(key_rows, _mm512_set1_epi32(i));
              const __m512 sum =
                  V::Add(V::Add(_mm512_i32gather_ps(at, st[0], 4), _mm512_i32gather_ps(at, st[0] + nq, 4)),
                         _mm512_i32gather_ps(at, st[0] + 2 * nq, 4));
              V::StorePartial(row + i * stride, V::Mul(sum, V::Set1(scale)), count);
            }
          }
        }
      }
    }
  }

  // scale_[b][t]: the F32 scale of value block b of key j0 + t of the
  // sequence in blocks `v` (Q8_0), for t < count; 0 beyond. Once per chunk,
  // for every group.
  void ChunkScales(const void* const* v, int block_keys, int j0, int count) {
    for (int t = 0; t < kChunkKeys; t += 16) {
      const int keys = count - t < 16 ? count - t : 16;
      const KeyInBlocks first = keys > 0 ? KeyAt(v, block_keys, j0 + t) : KeyInBlocks{nullptr, 0};
      if (keys > 0 && first.row + keys <= block_keys) {  // keys of one block: a load per value block
        for (int blk = 0; blk < kValueBlocks; ++blk) {
          const uint8_t* halves =
              Q8_0ValueScales(first.block, block_keys, blk) + static_cast<size_t>(first.row) * 2;
          V::Store(scale_[blk] + t, LoadHalvesQ8_0<V>(halves, keys));
        }
        continue;
      }
      for (int i = 0; i < 16; ++i) {  // keys across blocks (or none): one by one, 0 past the chunk
        for (int blk = 0; blk < kValueBlocks; ++blk) scale_[blk][t + i] = 0.0f;
        if (i >= keys) continue;
        const KeyInBlocks key = KeyAt(v, block_keys, j0 + t + i);
        for (int blk = 0; blk < kValueBlocks; ++blk) {
          uint16_t half;
          std::memcpy(&half, Q8_0ValueScales(key.block, block_keys, blk) + static_cast<size_t>(key.row) * 2, 2);
          scale_[blk][t + i] = V::HalfToFloat(half);
        }
      }
    }
  }

  // The A operands of group g for keys [j0, j0 + count) of the sequence:
  // each query's weights for the keys it sees (e^(score - max), its row of
  // `weights`), 0 for the others. BF16 caches: the weights' three BF16
  // parts; Q8_0: per value block, the weight times the block's scale
  // (scale_, ChunkScales) rounded to BF16 (attention_q8_0_values.h).
  void ChunkWeights(const AttentionTile& tile, int g, int nq, int j0, int count, const float* weights,
                    size_t stride) {
    const int n = QueriesIn(tile.count, g);
    if (n < nq) {  // the rows of a group's missing queries (another group wrote them)
      for (int t = 0; t < kWeightTiles; ++t) {
        std::memset(weight_[t] + n * kChunkKeys, 0, sizeof(uint16_t) * (nq - n) * kChunkKeys);
      }
    }
    for (int i = 0; i < n; ++i) {
      const int s = g * kGroup + i;
      int seen = tile.n[s] - j0;
      seen = seen < 0 ? 0 : seen > count ? count : seen;
      const float* w = weights + s * stride + j0;
      const __m512 lo = seen > 0 ? V::LoadPartial(w, seen < 16 ? seen : 16) : V::Zero();
      const __m512 hi = seen > 16 ? V::LoadPartial(w + 16, seen - 16) : V::Zero();
      if constexpr (kT == KvDtype::kQ8_0) {
        for (int blk = 0; blk < kValueBlocks; ++blk) {
          const __m512 x_lo = V::Mul(lo, V::Load(scale_[blk])), x_hi = V::Mul(hi, V::Load(scale_[blk] + 16));
          _mm512_store_si512(weight_[blk] + i * kChunkKeys, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(x_hi, x_lo)));
        }
      } else {
        __m512i parts[kQueryParts];
        SplitBf16(lo, hi, parts);
        for (int p = 0; p < kQueryParts; ++p) _mm512_store_si512(weight_[p] + i * kChunkKeys, parts[p]);
      }
    }
  }

  // O of group g += the chunk's weights . values (attention_amx.h's
  // order), four value slices at a time in four accumulators (tiles 0-3),
  // so their products do not wait for each other. The tile numbers are
  // written out: GCC's AMX intrinsics are macros that paste their arguments
  // into the instruction text, so they take literals only (a template
  // parameter compiles with clang and fails with GCC's assembler).
  void ChunkProducts(int g) {
    float* o = acc_[g].rows;
    constexpr int kSlices = hd / 16;
    static_assert(kSlices % 4 == 2 || kSlices % 4 == 0);
    for (int c = 0; c < kSlices; c += 4) {
      const bool four = c + 4 <= kSlices;  // else the head's last two slices
      _tile_loadd(0, o + 16 * c, hd * 4);
      _tile_loadd(1, o + 16 * (c + 1), hd * 4);
      if (four) {
        _tile_loadd(2, o + 16 * (c + 2), hd * 4);
        _tile_loadd(3, o + 16 * (c + 3), hd * 4);
      }
      if constexpr (kT == KvDtype::kQ8_0) {  // slices 2 blk and 2 blk + 1 share block blk's weights
        _tile_loadd(4, weight_[c / 2], 64);
        _tile_loadd(7, values_.tile[c], 64);
        _tile_dpbf16ps(0, 4, 7);
        _tile_loadd(7, values_.tile[c + 1], 64);
        _tile_dpbf16ps(1, 4, 7);
        if (four) {
          _tile_loadd(5, weight_[c / 2 + 1], 64);
          _tile_loadd(7, values_.tile[c + 2], 64);
          _tile_dpbf16ps(2, 5, 7);
          _tile_loadd(7, values_.tile[c + 3], 64);
          _tile_dpbf16ps(3, 5, 7);
        }
      } else {
        if (c == 0) {
          _tile_loadd(4, weight_[0], 64);
          _tile_loadd(5, weight_[1], 64);
          _tile_loadd(6, weight_[2], 64);
        }
        _tile_loadd(7, values_.tile[c], 64);
        _tile_dpbf16ps(0, 4, 7);
        _tile_dpbf16ps(0, 5, 7);
        _tile_dpbf16ps(0, 6, 7);
        _tile_loadd(7, values_.tile[c + 1], 64);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(1, 5, 7);
        _tile_dpbf16ps(1, 6, 7);
        if (four) {
          _tile_loadd(7, values_.tile[c + 2], 64);
          _tile_dpbf16ps(2, 4, 7);
          _tile_dpbf16ps(2, 5, 7);
          _tile_dpbf16ps(2, 6, 7);
          _tile_loadd(7, values_.tile[c + 3], 64);
          _tile_dpbf16ps(3, 4, 7);
          _tile_dpbf16ps(3, 5, 7);
          _tile_dpbf16ps(3, 6, 7);
        }
      }
      _tile_stored(0, o + 16 * c, hd * 4);
      _tile_stored(1, o + 16 * (c + 1), hd * 4);
      if (four) {
        _tile_stored(2, o + 16 * (c + 2), hd * 4);
        _tile_stored(3, o + 16 * (c + 3), hd * 4);
      }
    }
  }

  QueryTiles<hd> query_;
  ValueTiles<kT, hd> values_;
  AccRows<hd> acc_[2];
  alignas(64) uint16_t weight_[kWeightTiles][kGroup * kChunkKeys];
  alignas(64) float scale_[kT == KvDtype::kQ8_0 ? kValueBlocks : 1][kChunkKeys];  // Q8_0: ChunkScales
};

// ------------------------------------------------------------ entries

// Calls fn(std::integral_constant<int, hd>{}) for the head sizes the AMX
// kernels take; false for the others.
template <class Fn>
bool WithAmxHead(int head_dim, Fn&& fn) {
  switch (head_dim) {
    case 32: fn(std::integral_constant<int, 32>{}); return true;
    case 64: fn(std::integral_constant<int, 64>{}); return true;
    case 96: fn(std::integral_constant<int, 96>{}); return true;
    case 128: fn(std::integral_constant<int, 128>{}); return true;
    case 160: fn(std::integral_constant<int, 160>{}); return true;
    case 192: fn(std::integral_constant<int, 192>{}); return true;
    case 224: fn(std::integral_constant<int, 224>{}); return true;
    case 256: fn(std::integral_constant<int, 256>{}); return true;
    default: return false;
  }
}

// Calls fn(std::integral_constant<KvDtype, t>{}) for BF16 and Q8_0.
template <class Fn>
void WithAmxDtype(KvDtype dtype, Fn&& fn) {
  if (dtype == KvDtype::kBF16) fn(std::integral_constant<KvDtype, KvDtype::kBF16>{});
  if (dtype == KvDtype::kQ8_0) fn(std::integral_constant<KvDtype, KvDtype::kQ8_0>{});
}

// AttentionBlocksFn: the AMX tiles for every query count where
// AmxAttentionTakes, else `Fallback` (the AVX-512 kernel of the entry).
template <kernel_table::AttentionBlocksFn Fallback>
void AttentionBlocksAmx(KvDtype dtype, const float* q, int64_t q_row_stride, int rows, int heads,
                        const void* const* k, const void* const* v, int n_blocks, int block_keys, int head_dim,
                        const int* visible, float scale, float* max, float* sum, float* acc, float* scratch) {
  if (!AmxAttentionInUse() || !AmxAttentionTakes(dtype, head_dim)) {
    Fallback(dtype, q, q_row_stride, rows, heads, k, v, n_blocks, block_keys, head_dim, visible, scale, max, sum,
             acc, scratch);
    return;
  }
  WithAmxHead(head_dim, [&](auto head) {
    WithAmxDtype(dtype, [&](auto t) {
      AmxTilePasses<decltype(t)::value, decltype(head)::value> passes(scratch);
      AttentionBlocksTiledWith<V>(passes, q, q_row_stride, rows, heads, k, v, n_blocks, block_keys, visible, scale,
                                  max, sum, acc, scratch);
    });
  });
}

// A group of runs that start with the same page (AttentionRunsTiled's
// Group): shared leading blocks fold as one tile (AttentionRunsTiledWith),
// else a call per run. The shared part ends at a multiple of kChunkKeys
// keys (the blocks past it count as each run's own), so the value pass
// makes the chunks a call per run makes (AmxTilePasses::Values).
void AttentionRunsGroupAmx(KvDtype dtype, const float* q, int64_t q_row_stride, const AttentionRun* runs, int n_runs,
                           int heads, int block_keys, int head_dim, const int* visible, float scale, float* max,
                           float* sum, float* acc, float* scratch) {
  int shared_blocks = AttentionSharedBlocks(runs, n_runs, block_keys, visible);
  while (shared_blocks > 0 && shared_blocks * block_keys % kChunkKeys != 0) --shared_blocks;
  if (shared_blocks == 0) {
    kernel_table::AttentionRunsOneByOne(AttentionBlocksAmx<AttentionBlocksTiled<V>>, dtype, q, q_row_stride, runs,
                                        n_runs, heads, block_keys, head_dim, visible, scale, max, sum, acc, scratch);
    return;
  }
  WithAmxHead(head_dim, [&](auto head) {
    WithAmxDtype(dtype, [&](auto t) {
      AmxTilePasses<decltype(t)::value, decltype(head)::value> passes(scratch);
      AttentionRunsTiledWith<V>(passes, q, q_row_stride, runs, n_runs, heads, block_keys, shared_blocks, visible,
                                scale, max, sum, acc, scratch);
    });
  });
}

// AttentionRunsFn: the AMX groups where the AMX kernels take the head,
// else the AVX-512 runs kernel.
void AttentionRunsAmx(KvDtype dtype, const float* q, int64_t q_row_stride, const AttentionRun* runs, int n_runs,
                      int heads, int block_keys, int head_dim, const int* visible, float scale, float* max,
                      float* sum, float* acc, float* scratch) {
  if (!AmxAttentionInUse() || !AmxAttentionTakes(dtype, head_dim)) {
    AttentionRunsTiled<V>(dtype, q, q_row_stride, runs, n_runs, heads, block_keys, head_dim, visible, scale, max, sum,
                          acc, scratch);
    return;
  }
  AttentionRunsTiled<V, AttentionRunsGroupAmx>(dtype, q, q_row_stride, runs, n_runs, heads, block_keys, head_dim,
                                               visible, scale, max, sum, acc, scratch);
}

// AttentionHeadsFn: the AMX tiles, a decode row's KV heads in turn
// (AttentionHeadsTiledWith), where AmxAttentionTakes and the heads' queries
// fill one tile; else the AVX-512 kernel's entry.
void AttentionHeadsAmx(KvDtype dtype, const float* q, int heads, int kv_heads, const void* const* k,
                       const void* const* v, int n_blocks, int block_keys, int head_dim, int visible, float scale,
                       float* max, float* sum, float* acc, float* scratch) {
  if (!AmxAttentionInUse() || !AmxAttentionTakes(dtype, head_dim)) {
    AttentionHeadsTiled<V>(dtype, q, heads, kv_heads, k, v, n_blocks, block_keys, head_dim, visible, scale, max, sum,
                           acc, scratch);
    return;
  }
  if (kv_heads * heads > kAttentionTileQueries) {
    kernel_table::AttentionHeadsOneByOne(AttentionBlocksAmx<AttentionBlocksTiled<V>>, dtype, q, heads, kv_heads, k, v,
                                         n_blocks, block_keys, head_dim, visible, scale, max, sum, acc, scratch);
    return;
  }
  WithAmxHead(head_dim, [&](auto head) {
    WithAmxDtype(dtype, [&](auto t) {
      AmxTilePasses<decltype(t)::value, decltype(head)::value> passes(scratch);
      AttentionHeadsTiledWith<V>(passes, q, heads, kv_heads, k, v, n_blocks, block_keys, visible, scale, max, sum,
                                 acc, scratch);
    });
  });
}

}  // namespace
}  // namespace kvs

namespace kvs::kernel_table {

void FillAmxAttention(KernelTable* t) {
  t->attention_blocks = AttentionBlocksAmx<AttentionBlocksTiled<V>>;
  t->attention_blocks_per_query = AttentionBlocksAmx<AttentionBlocksWith<V>>;
  t->attention_runs = AttentionRunsAmx;
  t->attention_heads = AttentionHeadsAmx;
  t->amx_attention = true;
}

}  // namespace kvs::kernel_table
