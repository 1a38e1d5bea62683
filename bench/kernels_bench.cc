// Kernel benchmarks, single thread, for every kernel level the CPU supports:
//   read_bandwidth       sum over a 1 GiB buffer (portable and AVX2 loads,
//                        prefetched): the ceiling for GEMV
//   gemv_{exact,fast}    one activation row against 1024x1024, 3072x1024
//                        and 151936x1024 weights, per type: bytes/s of weights
//   gemm_{exact,fast}    nx = 8, 64, 512 activation rows against 3072x1024:
//                        FLOP/s (2 * rows * cols * nx per call); packed
//                        also nx = 8 against 151936x1024 (from memory),
//                        whole and in tasks of 64 and 192 rows one after
//                        another (/tasksN: as the engine's tasks cut it;
//                        /tasksN/ahead: each task told the next follows);
//                        gemv_packed 151936x1024 also in tasks of 64
//                        packed nx = 512 also as the engine's prefill
//                        cuts it (3072x1024/tasks192), and against the
//                        down projection's 1024x3072 (whole, /tasks64)
//   gemv_packed,         Q8_0 only, the fast path on weights in the packed
//   gemm_packed          layout (packed_q8_0.h), as models load them at the
//                        levels that pack (AVX2, AVX-512); gemv_fast and
//                        gemm_fast keep the GGUF rows, for A/B in one run
//   attention            one decode query row of a GQA group of 2 or 4 heads
//                        (head_dim 128) over 4096 keys in pages of 256, for
//                        every cache type: bytes/s of K and V; /96hd: 2
//                        heads of 96, the vector levels' fallback
//   attention_paged      the same row as decode sees it: pages of 16, 32
//                        and 64 tokens of a 28-layer, 8-KV-head model (page
//                        stride 1.8 MB at 16 tokens, f16), 4096 keys; each
//                        (layer, head)'s K and V are one block per page;
//                        "cold" takes a different (layer, head) each call
//                        so K and V come from memory, "warm" the same one
//                        (from cache): bytes/s of K and V, cold to hold
//                        against read_bandwidth, warm against cold; ".../pool":
//                        the pages in a PagePool's slabs, as kvsessiond
//                        holds them, instead of one mapping
//   attention_heads      one thread's share of a decode row at 16,384 keys:
//                        4 KV heads x 2 query heads, pages of 16 in the
//                        pool's layout, cold; an AttentionUpdateBlocks call
//                        per KV head ("per-head") against one
//                        AttentionUpdateHeads call ("together", the same
//                        bits): bytes/s of K and V; ".../8192keys/8kvheads":
//                        the same bytes as all 8 heads over half the keys
//                        (a row split by keys); ".../together/runsN": the
//                        pages in runs of N whose blocks of one (layer,
//                        head) lie side by side (N pages' keys one
//                        contiguous read), a layout the pool does not have
//   read_paged           the bytes attention_paged cold reads, only summed
//                        (AVX2 loads, each block's lines prefetched 2
//                        blocks ahead, as a decode row's stream does): the
//                        ceiling for attention_paged cold on one thread
//   read_heads           the bytes attention_heads .../16384keys/4kvheads
//                        cold reads, only summed, "by-head" (its order) or
//                        "by-page" (each page's heads side by side);
//                        ".../by-head/runsN" in attention_heads' runs
//   attention_prefill    a prefill step's tile: 16 prompt rows x a GQA group
//                        of 2 heads (32 queries, head_dim 128) over 4,096
//                        keys in pages of 16, the rows seeing the last 16
//                        keys causally: G multiply-adds/s (QK and PV);
//                        /96hd: heads of 96, the vector levels' fallback
//   attention_group      a decode row of one KV head's GQA group of 2, 4, 7
//                        (Qwen2.5-0.5B) or 8 query heads of 64 over 4,096
//                        keys in pages of 16, warm: G multiply-adds/s
//   attention_forks      a fan-out step's attention for one (layer, head):
//                        8 forks x 2 heads over a 512- and a 4,096-token
//                        prompt's shared pages and 8 keys each of their
//                        own, cold, as one AttentionUpdateRuns call
//                        ("shared") and as a call per fork ("one-by-one",
//                        the same bits): G multiply-adds/s
//   scores_q8_0          a decode row's q8_0 scores (a GQA pair, head_dim
//                        128) over 4,096 keys in blocks of 16, warm: from
//                        the key groups as the cache holds them, each
//                        where its block lies ("groups": ScoresQ8_0) and
//                        from the same keys as one packed matrix
//                        ("packed": one MatmulPackedQ8_0 call, the
//                        GEMM's own loop); the same scores (checked
//                        once): G
//                        multiply-adds/s
//   silu_mul             a prefill step's SwiGLU, 64 rows of 3,072 (per
//                        level: libm's expf at the scalar one): values/s
//   rms_norm             64 rows of 1,024, then their 64 x 24 heads of
//                        128 (a Qwen3 layer's norms of 64 rows): values/s
//   quantize_q8_0        a fan-out step's activations for one matmul: 8
//                        rows of 1,024 and of 3,072 rounded to Q8_0
//                        blocks (QuantizeActivations): values/s
// Run with --benchmark_filter=... to pick; each case runs 5 repetitions and
// reports mean/median/stddev.
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "bench/cpu_name.h"
#include "cache/kv_geometry.h"
#include "cache/page_pool.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/attention_q8_0_scores.h"
#include "kernels/cpu_features.h"
#include "kernels/fp16.h"
#include "kernels/ggml_types.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/packed_q8_0.h"
#include "kernels/q8_0_kv_blocks.h"
#include "kernels/quant_blocks.h"
#include "model/huge_page_arena.h"

namespace kvs {
namespace {

constexpr int64_t kCols = 1024;  // every matrix's but the down projection's

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Random weights of `type` built quickly: random bytes, then every float or
// block scale replaced by a sane value.
std::vector<uint8_t> RandomMatrixBytes(GgmlType type, int64_t rows, int64_t cols) {
  const GgmlTypeTraits t = GgmlTraits(static_cast<uint32_t>(type));
  std::vector<uint8_t> bytes(rows * (cols / t.block_elems) * t.block_bytes);
  uint64_t state = 12345;
  for (size_t i = 0; i + 8 <= bytes.size(); i += 8) {
    const uint64_t r = SplitMix64(state);
    std::memcpy(&bytes[i], &r, 8);
  }
  const size_t n_blocks = bytes.size() / t.block_bytes;
  const uint16_t small_scale = Fp32ToFp16(0.01f);
  for (size_t b = 0; b < n_blocks; ++b) {
    uint8_t* p = bytes.data() + b * t.block_bytes;
    const float v = static_cast<float>(static_cast<int32_t>(SplitMix64(state) >> 40) - (1 << 23)) / (1 << 23);
    switch (type) {
      case GgmlType::kF32: std::memcpy(p, &v, 4); break;
      case GgmlType::kF16: { const uint16_t h = Fp32ToFp16(v); std::memcpy(p, &h, 2); break; }
      case GgmlType::kBF16: { const uint16_t h = Fp32ToBf16(v); std::memcpy(p, &h, 2); break; }
      case GgmlType::kQ8_0: reinterpret_cast<BlockQ8_0*>(p)->d = small_scale; break;
      case GgmlType::kQ4_0: reinterpret_cast<BlockQ4_0*>(p)->d = small_scale; break;
      case GgmlType::kQ4_K:
        reinterpret_cast<BlockQ4_K*>(p)->d = small_scale;
        reinterpret_cast<BlockQ4_K*>(p)->dmin = small_scale;
        break;
      case GgmlType::kQ6_K: reinterpret_cast<BlockQ6_K*>(p)->d = small_scale; break;
      default: break;
    }
  }
  return bytes;
}

// One matrix alive at a time (the largest F32 one is 622 MB).
const std::vector<uint8_t>& CachedMatrix(GgmlType type, int64_t rows, int64_t cols = kCols) {
  static std::tuple<GgmlType, int64_t, int64_t> key{GgmlType::kF32, -1, -1};
  static std::vector<uint8_t> bytes;
  if (key != std::make_tuple(type, rows, cols)) {
    bytes.clear();
    bytes.shrink_to_fit();
    bytes = RandomMatrixBytes(type, rows, cols);
    key = {type, rows, cols};
  }
  return bytes;
}

std::vector<float> RandomFloats(size_t n) {
  uint64_t state = 99;
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(static_cast<int32_t>(SplitMix64(state) >> 40) - (1 << 23)) / (1 << 23);
  return v;
}

// n_keys values stored as rows of `dtype`, laid out as a cache's value
// blocks of `page` slots end to end: for q8_0 each block's scales, then its
// quants (q8_0_kv_blocks.h); the other types as they are.
std::vector<uint8_t> ValueBlocks(KvDtype dtype, const std::vector<uint8_t>& rows, int n_keys, int head_dim, int page) {
  if (dtype != KvDtype::kQ8_0) return rows;
  std::vector<uint8_t> blocks(rows.size());
  const size_t block_bytes = KvBytes(dtype, static_cast<int64_t>(page) * head_dim);
  for (int p = 0; p * page < n_keys; ++p) {
    Q8_0ValueBlockFromRows(rows.data() + p * block_bytes, page, head_dim, page, blocks.data() + p * block_bytes);
  }
  return blocks;
}

// Makes `isa` active for the benchmark; false (and the state skipped) when
// the CPU lacks it.
bool UseIsa(benchmark::State& state, KernelIsa isa) {
  if (ForceKernelIsa(isa)) return true;
  state.SkipWithError("kernel level not supported on this CPU");
  return false;
}

// Sums of a buffer, prefetching 8 KiB ahead like the matmul kernels: the
// portable loop and, where the CPU has it, 32-byte AVX2 loads.
uint64_t SumPortable(const uint64_t* p, size_t n) {
  uint64_t s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (size_t i = 0; i < n; i += 8) {
    __builtin_prefetch(p + i + 1024, 0, 3);
    for (int l = 0; l < 8; ++l) s[l] += p[i + l];
  }
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

__attribute__((target("avx2"))) uint64_t SumAvx2(const uint64_t* p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (size_t i = 0; i < n; i += 16) {
    __builtin_prefetch(p + i + 1024, 0, 3);
    a = _mm256_add_epi64(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_add_epi64(b, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    c = _mm256_add_epi64(c, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    d = _mm256_add_epi64(d, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
  return static_cast<uint64_t>(_mm256_extract_epi64(a, 0) + _mm256_extract_epi64(a, 1) +
                               _mm256_extract_epi64(a, 2) + _mm256_extract_epi64(a, 3));
}

void ReadBandwidth(benchmark::State& state, bool avx2) {
  if (avx2 && !__builtin_cpu_supports("avx2")) {
    state.SkipWithError("no AVX2");
    return;
  }
  // On huge pages where the kernel allows, as the packed weights are.
  const size_t n = (size_t{1} << 30) / sizeof(uint64_t);
  HugePageArena arena;
  auto* buf =
      arena.Reserve(n * sizeof(uint64_t)) ? reinterpret_cast<uint64_t*>(arena.Take(n * sizeof(uint64_t))) : nullptr;
  if (buf == nullptr) {
    state.SkipWithError("mmap failed");
    return;
  }
  for (size_t i = 0; i < n; ++i) buf[i] = i;
  for (auto _ : state) benchmark::DoNotOptimize(avx2 ? SumAvx2(buf, n) : SumPortable(buf, n));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n * 8));
}

// The cached matrix in the packed Q8_0 layout (one alive at a time), in a
// HugePageArena as models keep their packed weights.
const uint8_t* CachedPacked(const std::vector<uint8_t>& rows_bytes, int64_t rows, int64_t cols) {
  static const uint8_t* key = nullptr;
  static int64_t key_rows = -1, key_cols = -1;
  static std::unique_ptr<HugePageArena> arena;
  static uint8_t* packed = nullptr;
  if (key != rows_bytes.data() || key_rows != rows || key_cols != cols) {
    arena = std::make_unique<HugePageArena>();
    const size_t bytes = PackedQ8_0Bytes(rows, cols);
    packed = arena->Reserve(bytes) ? arena->Take(bytes) : nullptr;
    if (packed == nullptr) std::abort();
    PackQ8_0(rows_bytes.data(), rows_bytes.size() / rows, rows, cols, packed);
    key = rows_bytes.data();
    key_rows = rows;
    key_cols = cols;
  }
  return packed;
}

enum class MatmulCase { kExact, kFast, kPacked };

// y = x W^T for nx rows; exact (MatmulRows) or fast (QuantizeActivations +
// MatmulRowsQuantized) on the GGUF rows or on packed Q8_0 weights.
void Matmul(benchmark::State& state, KernelIsa isa, GgmlType type, int64_t rows, int nx, MatmulCase kind,
            int64_t task_rows, bool ask_ahead, int64_t cols) {
  if (!UseIsa(state, isa)) return;
  if (kind == MatmulCase::kPacked && !PackedQ8_0Supported()) {
    state.SkipWithError("this kernel level does not pack Q8_0");
    return;
  }
  const bool fast = kind != MatmulCase::kExact;
  const std::vector<uint8_t>& bytes = CachedMatrix(type, rows, cols);
  WeightMatrix w{type, bytes.data(), rows, cols, bytes.size() / rows};
  if (kind == MatmulCase::kPacked) w.packed = CachedPacked(bytes, rows, cols);
  const std::vector<float> x = RandomFloats(static_cast<size_t>(nx) * cols);
  std::vector<float> y(static_cast<size_t>(nx) * rows);
  std::vector<float> scratch(MatmulScratchFloats(cols));
  std::vector<uint8_t> xq(nx * ActivationBytes(type, cols));
  for (auto _ : state) {
    if (fast) {
      QuantizeActivations(type, cols, x.data(), nx, cols, xq.data());
      const int64_t step = task_rows > 0 ? task_rows : rows;
      for (int64_t r0 = 0; r0 < rows; r0 += step) {
        const int64_t r1 = r0 + step < rows ? r0 + step : rows;
        MatmulRowsQuantized(w, r0, r1, xq.data(), nx, y.data(), rows, ask_ahead ? r1 + step : 0, ask_ahead && r0 > 0);
      }
    } else {
      MatmulRows(w, 0, rows, x.data(), nx, cols, y.data(), rows, scratch.data());
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes.size()));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * cols * nx * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
}

// A prefill step's SwiGLU: 64 rows of 3,072 gate and up values.
void SiluMulRows(benchmark::State& state, KernelIsa isa) {
  if (!UseIsa(state, isa)) return;
  constexpr int kRows = 64, kWidth = 3072;
  const std::vector<float> gate = RandomFloats(static_cast<size_t>(kRows) * kWidth);
  const std::vector<float> up = RandomFloats(gate.size());
  std::vector<float> work(gate.size());
  for (auto _ : state) {
    state.PauseTiming();
    work = gate;
    state.ResumeTiming();
    for (int r = 0; r < kRows; ++r) SiluMul(work.data() + r * kWidth, up.data() + r * kWidth, kWidth);
    benchmark::DoNotOptimize(work.data());
  }
  state.SetItemsProcessed(state.iterations() * kRows * kWidth);
}

// quantize_q8_0 (the file's comment): nx rows of `cols` for Q8_0 weights.
void QuantizeQ8_0Rows(benchmark::State& state, KernelIsa isa, int nx, int64_t cols) {
  if (!UseIsa(state, isa)) return;
  const std::vector<float> x = RandomFloats(static_cast<size_t>(nx) * cols);
  std::vector<uint8_t> out(ActivationBytes(GgmlType::kQ8_0, cols) * nx);
  for (auto _ : state) {
    QuantizeActivations(GgmlType::kQ8_0, cols, x.data(), nx, cols, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * nx * cols);
}

// A Qwen3 layer's norms of 64 rows: each row's 1,024 values, then its 24
// heads of 128 (the q/k norms), in place.
void RmsNormRows(benchmark::State& state) {
  constexpr int kRows = 64, kDim = 1024, kHeads = 24, kHeadDim = 128;
  const std::vector<float> x = RandomFloats(static_cast<size_t>(kRows) * kHeads * kHeadDim);
  const std::vector<float> w = RandomFloats(kDim);
  std::vector<float> out(x.size());
  for (auto _ : state) {
    for (int r = 0; r < kRows; ++r) RmsNorm(x.data() + r * kDim, w.data(), 1e-6f, kDim, out.data() + r * kDim);
    for (int h = 0; h < kRows * kHeads; ++h) {
      RmsNorm(x.data() + h * kHeadDim, w.data(), 1e-6f, kHeadDim, out.data() + h * kHeadDim);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kRows * (kDim + kHeads * kHeadDim));
}

// One decode row: `heads` query heads of one GQA group over 4,096 keys.
void Attention(benchmark::State& state, KernelIsa isa, KvDtype dtype, int heads, int head_dim) {
  if (!UseIsa(state, isa)) return;
  const int n_keys = 4096, page = 256;
  const std::vector<float> kv_f32 = RandomFloats(static_cast<size_t>(n_keys) * head_dim);
  std::vector<uint8_t> k(KvBytes(dtype, static_cast<int64_t>(kv_f32.size()))), v(k.size());
  StoreKv(dtype, kv_f32.data(), k.data(), static_cast<int64_t>(kv_f32.size()));
  StoreKv(dtype, kv_f32.data(), v.data(), static_cast<int64_t>(kv_f32.size()));
  if (dtype == KvDtype::kQ8_0) Q8_0KeyBlockFromRows(v.data(), n_keys, head_dim, k.data());  // the cache's key groups
  v = ValueBlocks(dtype, v, n_keys, head_dim, page);
  const std::vector<float> q = RandomFloats(heads * head_dim);
  std::vector<float> m(heads), l(heads), acc(heads * head_dim), out(heads * head_dim);
  std::vector<float> scratch(AttentionScratchFloats(page, head_dim));
  const int visible = page;
  for (auto _ : state) {
    AttentionInit(heads, head_dim, m.data(), l.data(), acc.data());
    for (int p = 0; p < n_keys / page; ++p) {
      const size_t off = KvBytes(dtype, static_cast<int64_t>(p) * page * head_dim);
      AttentionUpdate(dtype, q.data(), heads * head_dim, 1, heads, k.data() + off, v.data() + off,
                      page, head_dim, &visible, 0.088f, m.data(), l.data(), acc.data(),
                      scratch.data());
    }
    AttentionFinish(1, heads, head_dim, l.data(), acc.data(), out.data(), heads * head_dim);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * (k.size() + v.size())));
}

// KV pages laid out as the pool does (kv_geometry.h: page[layer][k|v][head]
// [16 slots]), 28 layers x 8 KV heads, every block the same random keys.
// Either one mapping in huge pages, the pages side by side, or (in_pool)
// pages of a PagePool, in its slabs as kvsessiond holds them.
class PagedKv {
 public:
  static constexpr int kLayers = 28, kKvHeads = 8, kPageTokens = 16, kHeadDim = 128;

  // run_pages > 1 (not with in_pool): the pages in runs of that many, each
  // run's blocks of one (layer, part, head) side by side (a layout the pool
  // does not have: how fast its reads would be). pages % run_pages == 0.
  PagedKv(KvDtype dtype, int pages, int page_tokens = kPageTokens, bool in_pool = false, int run_pages = 1)
      : geometry_{.n_layers = kLayers, .n_kv_heads = kKvHeads, .head_dim = kHeadDim, .page_tokens = page_tokens,
                  .dtype = dtype},
        bytes_(geometry_.page_bytes() * pages),
        run_pages_(run_pages) {
    if (in_pool) {
      pool_ = std::make_unique<PagePool>(geometry_, pages);
      for (int p = 0; p < pages; ++p) {
        absl::StatusOr<PageId> id = pool_->Allocate();
        if (!id.ok()) return;
        page_data_.push_back(pool_->data(*id));
      }
    } else {
      void* memory = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (memory == MAP_FAILED) return;
      ::madvise(memory, bytes_, MADV_HUGEPAGE);
      mapping_ = static_cast<uint8_t*>(memory);
      for (int p = 0; p < pages; ++p) page_data_.push_back(mapping_ + p * geometry_.page_bytes());
    }
    const std::vector<float> block_f32 = RandomFloats(static_cast<size_t>(page_tokens) * kHeadDim);
    std::vector<uint8_t> block(block_bytes());
    StoreKv(dtype, block_f32.data(), block.data(), static_cast<int64_t>(block_f32.size()));
    // A q8_0 page's blocks are not rows (q8_0_kv_blocks.h).
    std::vector<uint8_t> key_block = block;
    if (dtype == KvDtype::kQ8_0) Q8_0KeyBlockFromRows(block.data(), page_tokens, kHeadDim, key_block.data());
    const std::vector<uint8_t> value_block = ValueBlocks(dtype, block, page_tokens, kHeadDim, page_tokens);
    for (int p = 0; p < pages; ++p) {
      for (int layer = 0; layer < kLayers; ++layer) {
        for (int head = 0; head < kKvHeads; ++head) {
          std::memcpy(mutable_block(p, 0, layer, head), key_block.data(), block_bytes());
          std::memcpy(mutable_block(p, 1, layer, head), value_block.data(), block_bytes());
        }
      }
    }
    ok_ = true;
  }
  ~PagedKv() {
    if (mapping_ != nullptr) ::munmap(mapping_, bytes_);
  }
  bool ok() const { return ok_; }
  size_t block_bytes() const { return geometry_.block_bytes(); }
  // Page p's K (part 0) or V (part 1) block of (layer, head).
  const void* block(int p, int part, int layer, int head) const { return mutable_block(p, part, layer, head); }

 private:
  uint8_t* mutable_block(int p, int part, int layer, int head) const {
    if (run_pages_ == 1) {
      return page_data_[p] + geometry_.block_offset(layer, part == 0 ? KvPart::kKey : KvPart::kValue, head);
    }
    const int run_first = p - p % run_pages_;
    const size_t index = ((static_cast<size_t>(layer) * 2 + part) * kKvHeads + head) * run_pages_ + p % run_pages_;
    return page_data_[run_first] + index * block_bytes();
  }

  KvGeometry geometry_;
  size_t bytes_;
  int run_pages_;
  std::unique_ptr<PagePool> pool_;  // in_pool
  uint8_t* mapping_ = nullptr;      // otherwise
  std::vector<uint8_t*> page_data_;
  bool ok_ = false;
};

// One decode row of a GQA group of 2 heads over 4,096 keys in the pool's
// layout (PagedKv) with pages of `page_tokens` tokens (kvsessiond's
// --page-tokens: a (layer, head)'s K or V is one block per page, so this is
// the length of each contiguous read). Cold: each call takes the next
// (layer, head), so its 2 x 4096 rows were last touched 223 calls (hundreds
// of MB) before, the case of decode at a long context. Warm: always the
// first (layer, head), so the same layout comes from cache.
void AttentionPaged(benchmark::State& state, KernelIsa isa, KvDtype dtype, bool cold, int page_tokens,
                    bool in_pool) {
  if (!UseIsa(state, isa)) return;
  constexpr int kKeys = 4096, kHeads = 2, kHeadDim = PagedKv::kHeadDim;
  const int pages = kKeys / page_tokens;
  PagedKv kv(dtype, pages, page_tokens, in_pool);
  if (!kv.ok()) {
    state.SkipWithError(in_pool ? "the page pool could not map its slabs" : "mmap failed");
    return;
  }
  const std::vector<float> q = RandomFloats(kHeads * kHeadDim);
  std::vector<float> m(kHeads), l(kHeads), acc(kHeads * kHeadDim), out(kHeads * kHeadDim);
  std::vector<float> scratch(AttentionBlocksScratchFloats(kKeys, page_tokens, kHeadDim, kHeads));
  std::vector<const void*> k(pages), v(pages);
  const int visible = kKeys;
  int call = 0;
  for (auto _ : state) {
    const int layer = call % PagedKv::kLayers, head = call / PagedKv::kLayers % PagedKv::kKvHeads;
    if (cold) ++call;
    for (int p = 0; p < pages; ++p) {
      k[p] = kv.block(p, 0, layer, head);
      v[p] = kv.block(p, 1, layer, head);
    }
    AttentionInit(kHeads, kHeadDim, m.data(), l.data(), acc.data());
    AttentionUpdateBlocks(dtype, q.data(), kHeads * kHeadDim, 1, kHeads, k.data(), v.data(), pages, page_tokens,
                          kHeadDim, &visible, 0.088f, m.data(), l.data(), acc.data(), scratch.data());
    AttentionFinish(1, kHeads, kHeadDim, l.data(), acc.data(), out.data(), kHeads * kHeadDim);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * pages * kv.block_bytes()));
}

// One thread's share of a decode row at a long context: 4 of the 8 KV
// heads of a layer (a GQA group of 2 heads each) over 16,384 keys in
// pages of 16, in the pool's layout, cold (each call the next layer and
// half of the heads). "per-head" is an AttentionUpdateBlocks call per KV
// head, as kvsession decoded before; "together" one AttentionUpdateHeads
// call, which takes the heads in turn over spans of pages (the same
// bits): bytes/s of K and V. With kv_heads = 8 ("8kvheads", together
// only): all 8 heads over 8,192 keys, the same bytes, which is a thread's
// share of a row split by keys rather than by heads: each page's blocks
// of a layer read as one run twice as long.
void AttentionHeads(benchmark::State& state, KernelIsa isa, KvDtype dtype, bool together, int kv_heads,
                    int run_pages) {
  if (!UseIsa(state, isa)) return;
  constexpr int kHeads = 2, kHeadDim = PagedKv::kHeadDim;
  const int kKvHeads = kv_heads, kKeys = 16384 * 4 / kv_heads;
  const int kPages = kKeys / PagedKv::kPageTokens, kQueries = kHeads * kKvHeads;
  PagedKv kv(dtype, kPages, PagedKv::kPageTokens, /*in_pool=*/false, run_pages);
  if (!kv.ok()) {
    state.SkipWithError("mmap failed");
    return;
  }
  const std::vector<float> q = RandomFloats(kQueries * kHeadDim);
  std::vector<float> m(kQueries), l(kQueries), acc(kQueries * kHeadDim), out(kQueries * kHeadDim);
  std::vector<float> scratch(AttentionBlocksScratchFloats(kKeys, PagedKv::kPageTokens, kHeadDim, kHeads));
  std::vector<const void*> k(kKvHeads * kPages), v(kKvHeads * kPages);
  const int visible = kKeys;
  int call = 0;
  for (auto _ : state) {
    const int layer = call % PagedKv::kLayers,
              first_head = call / PagedKv::kLayers % (PagedKv::kKvHeads / kKvHeads) * kKvHeads;
    ++call;
    for (int h = 0; h < kKvHeads; ++h) {
      for (int p = 0; p < kPages; ++p) {
        k[h * kPages + p] = kv.block(p, 0, layer, first_head + h);
        v[h * kPages + p] = kv.block(p, 1, layer, first_head + h);
      }
    }
    AttentionInit(kQueries, kHeadDim, m.data(), l.data(), acc.data());
    if (together) {
      AttentionUpdateHeads(dtype, q.data(), kHeads, kKvHeads, k.data(), v.data(), kPages, PagedKv::kPageTokens,
                           kHeadDim, visible, 0.088f, m.data(), l.data(), acc.data(), scratch.data());
    } else {
      for (int h = 0; h < kKvHeads; ++h) {
        const int i = h * kHeads;
        AttentionUpdateBlocks(dtype, q.data() + i * kHeadDim, 0, 1, kHeads, k.data() + h * kPages,
                              v.data() + h * kPages, kPages, PagedKv::kPageTokens, kHeadDim, &visible, 0.088f,
                              m.data() + i, l.data() + i, acc.data() + i * kHeadDim, scratch.data());
      }
    }
    AttentionFinish(1, kQueries, kHeadDim, l.data(), acc.data(), out.data(), kQueries * kHeadDim);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * kKvHeads * kPages * kv.block_bytes()));
}

// Sums the bytes of `n` blocks of `bytes` each, asking for block b + 2's
// lines into L2 while block b is read (BlockPrefetch's streamed distance
// and hint).
__attribute__((target("avx2"))) uint64_t SumBlocksAvx2(const void* const* blocks, int n, size_t bytes) {
  __m256i a = _mm256_setzero_si256(), b = a;
  uint64_t tail = 0;
  for (int i = 0; i < n; ++i) {
    const uint8_t* p = static_cast<const uint8_t*>(blocks[i]);
    const char* ahead = i + 2 < n ? static_cast<const char*>(blocks[i + 2]) : nullptr;
    size_t off = 0;
    for (; off + 64 <= bytes; off += 64) {
      if (ahead != nullptr) _mm_prefetch(ahead + off, _MM_HINT_T2);
      a = _mm256_add_epi64(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + off)));
      b = _mm256_add_epi64(b, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + off + 32)));
    }
    if (ahead != nullptr && off < bytes) _mm_prefetch(ahead + off, _MM_HINT_T2);
    for (; off < bytes; ++off) tail += p[off];  // q8_0 blocks end mid-line
  }
  a = _mm256_add_epi64(a, b);
  return tail + static_cast<uint64_t>(_mm256_extract_epi64(a, 0) + _mm256_extract_epi64(a, 1) +
                                      _mm256_extract_epi64(a, 2) + _mm256_extract_epi64(a, 3));
}

// Each call, `lists(kv, call, k, v)` puts `blocks` K and V block pointers
// of `kv` (pages of `page_tokens` tokens in the pool's layout, or in runs) in k and v,
// which are then summed (SumBlocksAvx2: each block's lines asked for 2
// blocks ahead in the order listed): bytes/s of K and V.
template <class Lists>
void ReadBlockLists(benchmark::State& state, KvDtype dtype, int pages, int page_tokens, int run_pages, size_t blocks,
                    Lists lists) {
  if (!__builtin_cpu_supports("avx2")) {
    state.SkipWithError("no AVX2");
    return;
  }
  PagedKv kv(dtype, pages, page_tokens, /*in_pool=*/false, run_pages);
  if (!kv.ok()) {
    state.SkipWithError("mmap failed");
    return;
  }
  std::vector<const void*> k(blocks), v(blocks);
  int call = 0;
  for (auto _ : state) {
    lists(kv, call++, k.data(), v.data());
    benchmark::DoNotOptimize(SumBlocksAvx2(k.data(), static_cast<int>(blocks), kv.block_bytes()));
    benchmark::DoNotOptimize(SumBlocksAvx2(v.data(), static_cast<int>(blocks), kv.block_bytes()));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * blocks * kv.block_bytes()));
}

// What attention_paged cold reads, only read: each call the K blocks then
// the V blocks of the next (layer, head) over 4,096 keys, so the bytes and
// their order are a cold decode row's, without its arithmetic.
void ReadPaged(benchmark::State& state, KvDtype dtype, int page_tokens) {
  const int pages = 4096 / page_tokens;
  ReadBlockLists(state, dtype, pages, page_tokens, /*run_pages=*/1, pages,
                 [pages](const PagedKv& kv, int call, const void** k, const void** v) {
                   const int layer = call % PagedKv::kLayers, head = call / PagedKv::kLayers % PagedKv::kKvHeads;
                   for (int p = 0; p < pages; ++p) {
                     k[p] = kv.block(p, 0, layer, head);
                     v[p] = kv.block(p, 1, layer, head);
                   }
                 });
}

// What attention_heads/<type>/avx512/cold/16384keys/4kvheads/together
// reads, only read, in two orders: "by-head" as AttentionUpdateHeads reads
// (each head's blocks of a span of 16 pages in turn: 2 KB runs, q8_0, 16
// tokens), "by-page" each page's 4 heads side by side (8.7 KB runs). Each
// call takes the next layer and share of heads, as attention_heads does.
void ReadHeads(benchmark::State& state, KvDtype dtype, bool by_page, int run_pages) {
  constexpr int kKeys = 16384, kKvHeads = 4, kSpanPages = 16;
  const int pages = kKeys / PagedKv::kPageTokens;
  ReadBlockLists(state, dtype, pages, PagedKv::kPageTokens, run_pages, static_cast<size_t>(pages) * kKvHeads,
                 [pages, by_page](const PagedKv& kv, int call, const void** k, const void** v) {
                   const int layer = call % PagedKv::kLayers,
                             first_head = call / PagedKv::kLayers % (PagedKv::kKvHeads / kKvHeads) * kKvHeads;
                   size_t i = 0;
                   for (int p0 = 0; p0 < pages; p0 += kSpanPages) {
                     for (int a = 0; a < (by_page ? kSpanPages : kKvHeads); ++a) {
                       for (int b = 0; b < (by_page ? kKvHeads : kSpanPages); ++b, ++i) {
                         const int p = p0 + (by_page ? a : b), h = first_head + (by_page ? b : a);
                         k[i] = kv.block(p, 0, layer, h);
                         v[i] = kv.block(p, 1, layer, h);
                       }
                     }
                   }
                 });
}

// A fan-out step's attention for one (layer, KV head): 8 forks of a
// `prompt`-token prompt, each a decode row of 2 heads that sees the prompt's
// shared pages and 8 keys of a page of its own, in the pool's layout; each
// call takes the next (layer, head), as a step does. "shared" is one
// AttentionUpdateRuns call (the forks fold the shared pages as one tile),
// "one-by-one" an AttentionUpdateBlocks call per fork (the same bits):
// G multiply-adds/s (QK and PV).
void AttentionForks(benchmark::State& state, KernelIsa isa, KvDtype dtype, bool shared, int prompt) {
  if (!UseIsa(state, isa)) return;
  constexpr int kForks = 8, kOwnKeys = 8, kHeads = 2;
  constexpr int kHeadDim = PagedKv::kHeadDim, kPageTokens = PagedKv::kPageTokens, kQueries = kForks * kHeads;
  const int shared_pages = prompt / kPageTokens, pages = shared_pages + 1;
  PagedKv kv(dtype, shared_pages + kForks);
  if (!kv.ok()) {
    state.SkipWithError("mmap failed");
    return;
  }
  const std::vector<float> q = RandomFloats(kQueries * kHeadDim);
  std::vector<float> m(kQueries), l(kQueries), acc(kQueries * kHeadDim), out(kQueries * kHeadDim);
  std::vector<float> scratch(AttentionBlocksScratchFloats(pages * kPageTokens, kPageTokens, kHeadDim, kHeads));
  std::vector<const void*> blocks(2 * kForks * pages);
  AttentionRun runs[kForks];
  int visible[kForks];
  int call = 0;
  for (auto _ : state) {
    const int layer = call % PagedKv::kLayers, head = call / PagedKv::kLayers % PagedKv::kKvHeads;
    ++call;
    for (int f = 0; f < kForks; ++f) {
      const void** k = &blocks[2 * f * pages];
      const void** v = k + pages;
      for (int p = 0; p < pages; ++p) {
        const int page = p < shared_pages ? p : shared_pages + f;
        k[p] = kv.block(page, 0, layer, head);
        v[p] = kv.block(page, 1, layer, head);
      }
      runs[f] = {1, k, v, pages};
      visible[f] = prompt + kOwnKeys;
    }
    AttentionInit(kQueries, kHeadDim, m.data(), l.data(), acc.data());
    if (shared) {
      AttentionUpdateRuns(dtype, q.data(), kHeads * kHeadDim, runs, kForks, kHeads, kPageTokens, kHeadDim, visible,
                          0.088f, m.data(), l.data(), acc.data(), scratch.data());
    } else {
      for (int f = 0; f < kForks; ++f) {
        AttentionUpdateBlocks(dtype, q.data() + f * kHeads * kHeadDim, kHeads * kHeadDim, 1, kHeads,
                              runs[f].k_blocks, runs[f].v_blocks, pages, kPageTokens, kHeadDim, &visible[f],
                              0.088f, m.data() + f * kHeads, l.data() + f * kHeads,
                              acc.data() + f * kHeads * kHeadDim, scratch.data());
      }
    }
    AttentionFinish(kForks, kHeads, kHeadDim, l.data(), acc.data(), out.data(), kHeads * kHeadDim);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GMAC/s"] = benchmark::Counter(
      2.0 * kQueries * (prompt + kOwnKeys) * kHeadDim * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

// One prefill call: 16 rows x 2 heads over 4,096 keys in 16-token pages (one
// (layer, head) of the pool's layout, so pages are contiguous here). Heads
// of 128 values take the tiled kernel; heads of 96 the fallback
// (simd_attention.h AttentionBlocksOneStep) on both vector levels.
void AttentionPrefill(benchmark::State& state, KernelIsa isa, KvDtype dtype, int head_dim, int rows, int heads) {
  if (!UseIsa(state, isa)) return;
  constexpr int kKeys = 4096, kPageTokens = 16;
  const int kHeadDim = head_dim, kHeads = heads, kRows = rows;
  constexpr int kPages = kKeys / kPageTokens;
  const std::vector<float> kv_f32 = RandomFloats(static_cast<size_t>(kKeys) * kHeadDim);
  std::vector<uint8_t> k(KvBytes(dtype, static_cast<int64_t>(kv_f32.size()))), v(k.size());
  StoreKv(dtype, kv_f32.data(), k.data(), static_cast<int64_t>(kv_f32.size()));
  StoreKv(dtype, kv_f32.data(), v.data(), static_cast<int64_t>(kv_f32.size()));
  if (dtype == KvDtype::kQ8_0) Q8_0KeyBlockFromRows(v.data(), kKeys, kHeadDim, k.data());  // the cache's key groups
  v = ValueBlocks(dtype, v, kKeys, kHeadDim, kPageTokens);
  const size_t block_bytes = KvBytes(dtype, int64_t{kPageTokens} * kHeadDim);
  std::vector<const void*> kb(kPages), vb(kPages);
  for (int p = 0; p < kPages; ++p) {
    kb[p] = k.data() + p * block_bytes;
    vb[p] = v.data() + p * block_bytes;
  }
  const std::vector<float> q = RandomFloats(kRows * kHeads * kHeadDim);
  const int kQueries = kRows * kHeads;
  std::vector<float> m(kQueries), l(kQueries), acc(kQueries * kHeadDim), out(kQueries * kHeadDim);
  std::vector<float> scratch(AttentionBlocksScratchFloats(kKeys, kPageTokens, kHeadDim, kHeads * kRows));
  std::vector<int> visible(kRows);
  for (int r = 0; r < kRows; ++r) visible[r] = kKeys - kRows + 1 + r;
  for (auto _ : state) {
    AttentionInit(kQueries, kHeadDim, m.data(), l.data(), acc.data());
    AttentionUpdateBlocks(dtype, q.data(), kHeads * kHeadDim, kRows, kHeads, kb.data(), vb.data(), kPages,
                          kPageTokens, kHeadDim, visible.data(), 0.088f, m.data(), l.data(), acc.data(),
                          scratch.data());
    AttentionFinish(kRows, kHeads, kHeadDim, l.data(), acc.data(), out.data(), kHeads * kHeadDim);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GMAC/s"] = benchmark::Counter(2.0 * kQueries * kKeys * kHeadDim * state.iterations() / 1e9,
                                                benchmark::Counter::kIsRate);
}

// scores_q8_0 (the file's comment): `packed` picks the layout.
void ScoresQ8_0Layouts(benchmark::State& state, KernelIsa isa, bool packed) {
  if (!UseIsa(state, isa)) return;
  if (!PackedQ8_0Supported()) {
    state.SkipWithError("this kernel level does not pack Q8_0");
    return;
  }
  constexpr int kKeys = 4096, kHeadDim = 128, kBlockKeys = 16, kQueries = 2;
  const std::vector<float> keys_f32 = RandomFloats(static_cast<size_t>(kKeys) * kHeadDim);
  std::vector<uint8_t> keys(KvBytes(KvDtype::kQ8_0, static_cast<int64_t>(keys_f32.size())));
  StoreKv(KvDtype::kQ8_0, keys_f32.data(), keys.data(), static_cast<int64_t>(keys_f32.size()));
  const size_t row_bytes = KvBytes(KvDtype::kQ8_0, kHeadDim);
  std::vector<uint8_t> groups(keys.size());
  Q8_0KeyBlockFromRows(keys.data(), kKeys, kHeadDim, groups.data());  // blocks of 16: one group each
  std::vector<const void*> blocks(kKeys / kBlockKeys);
  for (size_t b = 0; b < blocks.size(); ++b) blocks[b] = groups.data() + b * kBlockKeys * row_bytes;
  std::vector<uint8_t> packed_keys(PackedQ8_0Bytes(kKeys, kHeadDim));
  PackQ8_0(keys.data(), row_bytes, kKeys, kHeadDim, packed_keys.data());
  const size_t query_bytes = QueryQ8_0Bytes(kHeadDim);
  const std::vector<float> q = RandomFloats(static_cast<size_t>(kQueries) * kHeadDim);
  std::vector<uint8_t> queries(kQueries * query_bytes);
  for (int j = 0; j < kQueries; ++j) {
    QuantizeQueryQ8_0(q.data() + j * kHeadDim, kHeadDim, 0.088f, &queries[j * query_bytes]);
  }
  const auto from_rows = [&](float* out) {
    ScoresQ8_0(queries.data(), kQueries, kHeadDim, blocks.data(), kBlockKeys, kKeys, out, kKeys);
  };
  const auto from_packed = [&](float* out) {
    MatmulPackedQ8_0(packed_keys.data(), kKeys, kHeadDim, 0, kKeys, queries.data(), query_bytes, kHeadDim, kQueries,
                     out, kKeys);
  };
  std::vector<float> scores(kQueries * kKeys), other(kQueries * kKeys);
  from_rows(scores.data());
  from_packed(other.data());
  if (std::memcmp(scores.data(), other.data(), scores.size() * sizeof(float)) != 0) {
    state.SkipWithError("the two layouts' scores differ");
    return;
  }
  for (auto _ : state) {
    if (packed) {
      from_packed(scores.data());
    } else {
      from_rows(scores.data());
    }
    benchmark::DoNotOptimize(scores.data());
  }
  state.counters["GMAC/s"] = benchmark::Counter(
      static_cast<double>(kQueries) * kKeys * kHeadDim * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

void RegisterAll() {
  const auto configure = [](benchmark::internal::Benchmark* b) {
    b->Repetitions(5)->ReportAggregatesOnly(true)->UseRealTime()->Unit(benchmark::kMicrosecond);
  };
  configure(benchmark::RegisterBenchmark("read_bandwidth/1GiB/portable", ReadBandwidth, false));
  configure(benchmark::RegisterBenchmark("read_bandwidth/1GiB/avx2", ReadBandwidth, true));
  const GgmlType types[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,
                            GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K};
  const KernelIsa isas[] = {KernelIsa::kScalar, KernelIsa::kAvx2, KernelIsa::kAvx512};
  // (rows, nx) of every matmul case: GEMV over three shapes, GEMM over
  // 3072x1024; the packed fast path also gets 2, 4 and 8 rows against
  // 151936x1024 (155 MB, the weights stream from memory, as in a step of 2
  // to 8 sessions or forks decoding together).
  const std::pair<int64_t, int> shapes[] = {{1024, 1}, {3072, 1}, {151936, 1}, {3072, 8}, {3072, 64},
                                            {3072, 512}, {151936, 2}, {151936, 4}, {151936, 8}};
  for (auto [rows, nx] : shapes) {
    for (GgmlType type : types) {
      for (KernelIsa isa : isas) {
        for (MatmulCase kind : {MatmulCase::kExact, MatmulCase::kFast, MatmulCase::kPacked}) {
          if (kind == MatmulCase::kPacked && type != GgmlType::kQ8_0) continue;
          if (nx > 1 && rows > 3072 && kind != MatmulCase::kPacked) continue;
          const char* label = kind == MatmulCase::kExact ? "exact/" : kind == MatmulCase::kFast ? "fast/" : "packed/";
          const std::string name = std::string(nx == 1 ? "gemv_" : "gemm_") + label +
                                   GgmlTypeName(static_cast<uint32_t>(type)) + "/" +
                                   KernelIsaName(isa) + "/" +
                                   (nx == 1 ? "" : "nx" + std::to_string(nx) + "/") +
                                   std::to_string(rows) + "x1024";
          configure(benchmark::RegisterBenchmark(name.c_str(), Matmul, isa, type, rows, nx, kind, int64_t{0}, false,
                                                 kCols));
          if (kind == MatmulCase::kPacked && (nx == 8 || nx == 1) && rows > 3072) {
            // The same pass cut into tasks as the engine cuts its matmuls,
            // one task after another on one thread: 64 rows (a 1,024-row
            // matrix's tasks on two threads: decode's) and 192 (a 3,072-row
            // matrix's, and fan-out's smallest: PackedQ8_0MinCallRows); /ahead
            // tells each task that the next one follows (ask_end, as the
            // engine's spans of tasks do).
            for (int64_t task_rows : {64, 192}) {
              if (nx == 1 && task_rows != 64) continue;
              const std::string tasks = name + "/tasks" + std::to_string(task_rows);
              configure(benchmark::RegisterBenchmark(tasks.c_str(), Matmul, isa, type, rows, nx, kind, task_rows,
                                                     false, kCols));
              configure(benchmark::RegisterBenchmark((tasks + "/ahead").c_str(), Matmul, isa, type, rows, nx, kind,
                                                     task_rows, true, kCols));
            }
          }
        }
      }
    }
  }
  // Prefill's packed GEMM as the engine cuts it on two threads (tasks of
  // 192 rows of a 3,072-row matrix, 64 of a 1,024-row one), and the
  // down projection's shape (1,024 rows of 3,072 columns).
  for (KernelIsa isa : isas) {
    const std::string name = std::string("gemm_packed/Q8_0/") + KernelIsaName(isa) + "/nx512/";
    configure(benchmark::RegisterBenchmark((name + "3072x1024/tasks192").c_str(), Matmul, isa, GgmlType::kQ8_0,
                                           int64_t{3072}, 512, MatmulCase::kPacked, int64_t{192}, false, kCols));
    configure(benchmark::RegisterBenchmark((name + "1024x3072").c_str(), Matmul, isa, GgmlType::kQ8_0,
                                           int64_t{1024}, 512, MatmulCase::kPacked, int64_t{0}, false, int64_t{3072}));
    configure(benchmark::RegisterBenchmark((name + "1024x3072/tasks64").c_str(), Matmul, isa, GgmlType::kQ8_0,
                                           int64_t{1024}, 512, MatmulCase::kPacked, int64_t{64}, false, int64_t{3072}));
  }
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16, KvDtype::kQ8_0}) {
    for (KernelIsa isa : isas) {
      for (int heads : {2, 4}) {
        const std::string name = std::string("attention/") + KvDtypeName(dtype) + "/" + KernelIsaName(isa) +
                                 "/4096keys/" + std::to_string(heads) + "heads";
        configure(benchmark::RegisterBenchmark(name.c_str(), Attention, isa, dtype, heads, 128));
      }
      configure(benchmark::RegisterBenchmark(
          (std::string("attention/") + KvDtypeName(dtype) + "/" + KernelIsaName(isa) + "/4096keys/2heads/96hd").c_str(),
          Attention, isa, dtype, 2, 96));
      const std::string prefill = std::string("attention_prefill/") + KvDtypeName(dtype) + "/" + KernelIsaName(isa) +
                                  "/32queries/4096keys";
      configure(benchmark::RegisterBenchmark(prefill.c_str(), AttentionPrefill, isa, dtype, 128, 16, 2));
      configure(benchmark::RegisterBenchmark((prefill + "/96hd").c_str(), AttentionPrefill, isa, dtype, 96, 16, 2));
      for (int group : {2, 4, 7, 8}) {
        const std::string name = std::string("attention_group/") + KvDtypeName(dtype) + "/" + KernelIsaName(isa) +
                                 "/4096keys/" + std::to_string(group) + "heads/64hd";
        configure(benchmark::RegisterBenchmark(name.c_str(), AttentionPrefill, isa, dtype, 64, 1, group));
      }
      for (int prompt : {512, 4096}) {
        for (bool shared : {true, false}) {
          const std::string forks = std::string("attention_forks/") + KvDtypeName(dtype) + "/" +
                                    KernelIsaName(isa) + (shared ? "/shared" : "/one-by-one") + "/8forks/" +
                                    std::to_string(prompt) + "keys";
          configure(benchmark::RegisterBenchmark(forks.c_str(), AttentionForks, isa, dtype, shared, prompt));
        }
      }
      for (bool cold : {true, false}) {
        for (int page_tokens : {16, 32, 64}) {
          const std::string paged = std::string("attention_paged/") + KvDtypeName(dtype) + "/" +
                                    KernelIsaName(isa) + (cold ? "/cold" : "/warm") + "/4096keys/2heads/" +
                                    std::to_string(page_tokens) + "tokens";
          configure(
              benchmark::RegisterBenchmark(paged.c_str(), AttentionPaged, isa, dtype, cold, page_tokens, false));
        }
        // The same row in a PagePool's pages (its slabs, as kvsessiond
        // holds them) rather than one mapping.
        const std::string pool = std::string("attention_paged/") + KvDtypeName(dtype) + "/" + KernelIsaName(isa) +
                                 (cold ? "/cold" : "/warm") + "/4096keys/2heads/16tokens/pool";
        configure(benchmark::RegisterBenchmark(pool.c_str(), AttentionPaged, isa, dtype, cold, 16, true));
      }
      for (bool together : {false, true}) {
        const std::string heads = std::string("attention_heads/") + KvDtypeName(dtype) + "/" + KernelIsaName(isa) +
                                  "/cold/16384keys/4kvheads/" + (together ? "together" : "per-head");
        configure(benchmark::RegisterBenchmark(heads.c_str(), AttentionHeads, isa, dtype, together, 4, 1));
      }
      for (int run_pages : {4, 16, 1024}) {
        const std::string runs = std::string("attention_heads/") + KvDtypeName(dtype) + "/" + KernelIsaName(isa) +
                                 "/cold/16384keys/4kvheads/together/runs" + std::to_string(run_pages);
        configure(benchmark::RegisterBenchmark(runs.c_str(), AttentionHeads, isa, dtype, true, 4, run_pages));
      }
      const std::string by_keys = std::string("attention_heads/") + KvDtypeName(dtype) + "/" + KernelIsaName(isa) +
                                  "/cold/8192keys/8kvheads/together";
      configure(benchmark::RegisterBenchmark(by_keys.c_str(), AttentionHeads, isa, dtype, true, 8, 1));
    }
  }
  for (KernelIsa isa : {KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    for (bool packed : {false, true}) {
      const std::string name = std::string("scores_q8_0/") + KernelIsaName(isa) + "/2queries/4096keys/" +
                               (packed ? "packed" : "groups");
      configure(benchmark::RegisterBenchmark(name.c_str(), ScoresQ8_0Layouts, isa, packed));
    }
  }
  for (KernelIsa isa : isas) {
    configure(benchmark::RegisterBenchmark((std::string("silu_mul/") + KernelIsaName(isa) + "/64x3072").c_str(),
                                           SiluMulRows, isa));
  }
  configure(benchmark::RegisterBenchmark("rms_norm/64x1024+64x24x128", RmsNormRows));
  for (KernelIsa isa : isas) {
    for (int64_t cols : {int64_t{1024}, int64_t{3072}}) {
      const std::string name =
          std::string("quantize_q8_0/") + KernelIsaName(isa) + "/8x" + std::to_string(cols);
      configure(benchmark::RegisterBenchmark(name.c_str(), QuantizeQ8_0Rows, isa, 8, cols));
    }
  }
  for (KvDtype dtype : {KvDtype::kF16, KvDtype::kQ8_0}) {
    for (int page_tokens : {16, 32, 64}) {
      const std::string read = std::string("read_paged/") + KvDtypeName(dtype) + "/4096keys/" +
                               std::to_string(page_tokens) + "tokens";
      configure(benchmark::RegisterBenchmark(read.c_str(), ReadPaged, dtype, page_tokens));
    }
    for (bool by_page : {false, true}) {
      const std::string read = std::string("read_heads/") + KvDtypeName(dtype) + "/16384keys/4kvheads/" +
                               (by_page ? "by-page" : "by-head");
      configure(benchmark::RegisterBenchmark(read.c_str(), ReadHeads, dtype, by_page, 1));
    }
    for (int run_pages : {4, 16, 1024}) {
      const std::string read = std::string("read_heads/") + KvDtypeName(dtype) + "/16384keys/4kvheads/by-head/runs" +
                               std::to_string(run_pages);
      configure(benchmark::RegisterBenchmark(read.c_str(), ReadHeads, dtype, false, run_pages));
    }
  }
}

}  // namespace
}  // namespace kvs

int main(int argc, char** argv) {
  kvs::RegisterAll();
  benchmark::AddCustomContext("cpu", kvs::CpuModelName());
  benchmark::AddCustomContext("default kernels", kvs::ActiveKernelsName());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
