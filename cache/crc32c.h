// CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78): the
// checksum of every encoded page and every stored record
// (docs/storage-format.md).
//
// Crc32c(data, n) is the standard CRC-32C of the bytes (initial value and
// final xor 0xFFFFFFFF): Crc32c("123456789", 9) == 0xE3069283. `init`
// extends a checksum: Crc32c(b, nb, Crc32c(a, na)) == CRC-32C of a then b.
//
// On x86-64 CPUs with VPCLMULQDQ (AVX-512: Ice Lake, Zen 4 and later; AVX2:
// Zen 3), inputs of kClmulMinBytes or more are folded by carry-less
// multiplication (crc32c_fold.h; with AVX-512, 48 GB/s from cache on a 2.1
// GHz Zen 5 against the CRC instruction's 24, `kvs-bench-kernels
// --benchmark_filter=crc32c`). Otherwise, with SSE4.2, the `crc32`
// instruction computes it: inputs of at least 3 x kInterleaveBlock bytes as
// three interleaved streams joined by a table-driven shift (8 bytes per
// cycle, ~25 GB/s on Zen 4), shorter ones as one stream (8 bytes every 3
// cycles); elsewhere a table-driven version does (slicing by 8, ~1-2 GB/s).
// Every path gives the same value. The choice is made once, at first use.
// Pure functions, thread-safe.
#ifndef KVSESSION_CACHE_CRC32C_H_
#define KVSESSION_CACHE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace kvs {

uint32_t Crc32c(const void* data, size_t n, uint32_t init = 0);

// The implementations behind Crc32c, exposed so tests and benchmarks can
// compare them.
namespace crc32c_internal {
uint32_t Portable(const void* data, size_t n, uint32_t init);
// Whether this CPU has the SSE4.2 crc32 instruction.
bool HaveSse42();
// Bytes per stream of the interleaved hardware path.
inline constexpr size_t kInterleaveBlock = 4096;
// Requires HaveSse42().
uint32_t Sse42(const void* data, size_t n, uint32_t init);
// The carry-less fold (crc32c_fold.h) in 512-bit registers: whether this
// CPU has AVX512F, VPCLMULQDQ, PCLMULQDQ and SSE4.2, and the function,
// which requires it (crc32c_clmul_avx512.cc).
bool HaveAvx512Clmul();
uint32_t Avx512Clmul(const void* data, size_t n, uint32_t init);
// The same in 256-bit registers, for AVX2 with VPCLMULQDQ (crc32c_clmul_avx2.cc).
bool HaveAvx2Clmul();
uint32_t Avx2Clmul(const void* data, size_t n, uint32_t init);
// Inputs shorter than this go to Sse42 from either (the fold pays from a
// few steps on).
inline constexpr size_t kClmulMinBytes = 512;
}  // namespace crc32c_internal

}  // namespace kvs

#endif  // KVSESSION_CACHE_CRC32C_H_
