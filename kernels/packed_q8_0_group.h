// One packed Q8_0 group as the kernels read it (packed_q8_0.h states the
// layout): where its quants start, and how a pass from memory asks for
// its scales. Shared by the packer and every level's GEMM (scalar, AVX2,
// AVX-512, AMX) so that the layout's arithmetic is written once.
//
// Pure functions of their arguments; AskForGroupScales only hints the
// cache, it never changes a result.
//
// Include only from kernel translation units: everything is in an
// anonymous namespace (the ODR rule in cpu_features.h: each SIMD file
// owns its copy, compiled with its own flags).
#ifndef KVSESSION_KERNELS_PACKED_Q8_0_GROUP_H_
#define KVSESSION_KERNELS_PACKED_Q8_0_GROUP_H_

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace kvs {
namespace {

// Bytes of a group's F16 scales for nb blocks ([nb][16], padded to 64
// bytes): the offset of its quants.
inline size_t ScalesBytes(int64_t nb) { return (static_cast<size_t>(nb) * 32 + 63) / 64 * 64; }

// Asks for a group's scale lines into L1 as the group starts, and for
// nothing else: what a call of 1 to 4 activation rows (decode, a step of
// a few sessions) does at the AVX2 and AVX-512 levels. The scales are a
// second stream beside the quants, one line per two blocks, too slow for
// the hardware prefetcher to follow: each of their lines was a miss to
// memory in the middle of the group, and the blocks behind it waited.
// Asked for together, they arrive in about one memory latency while the
// first blocks compute, and the quants, one sequential stream, are left
// to the hardware prefetcher: asking for them too (into L1, one group
// ahead, as until the sixty-eighth sitting) held the core's few L1 miss
// buffers and made the pass slower. On Zen 4, gemv_packed/Q8_0/avx512 and
// avx2 151936x1024 from memory took 0.69x and 0.58x the time of that
// asking (docs/performance/zen4.md, "A single row's scales asked for as its
// group starts").
inline void AskForGroupScales(const uint8_t* group, int64_t nb) {
  for (size_t line = 0; line < ScalesBytes(nb); line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(group + line), _MM_HINT_T0);
  }
}

}  // namespace
}  // namespace kvs

#endif  // KVSESSION_KERNELS_PACKED_Q8_0_GROUP_H_
