// CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78): the
// checksum of every encoded page and every stored record
// (docs/storage-format.md).
//
// Crc32c(data, n) is the standard CRC-32C of the bytes (initial value and
// final xor 0xFFFFFFFF): Crc32c("123456789", 9) == 0xE3069283. `init`
// extends a checksum: Crc32c(b, nb, Crc32c(a, na)) == CRC-32C of a then b.
//
// On x86-64 CPUs with SSE4.2 the `crc32` instruction computes it: inputs of
// at least 3 x kInterleaveBlock bytes as three interleaved streams joined by
// a table-driven shift (8 bytes per cycle, ~25 GB/s on Zen 4), shorter ones
// as one stream (8 bytes every 3 cycles); elsewhere a table-driven version
// does (slicing by 8, ~1-2 GB/s).
// The choice is made once, at first use. Pure functions, thread-safe.
#ifndef KVSESSION_CACHE_CRC32C_H_
#define KVSESSION_CACHE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace kvs {

uint32_t Crc32c(const void* data, size_t n, uint32_t init = 0);

// The two implementations behind Crc32c, exposed so tests can compare them.
namespace crc32c_internal {
uint32_t Portable(const void* data, size_t n, uint32_t init);
// Whether this CPU has the SSE4.2 crc32 instruction.
bool HaveSse42();
// Bytes per stream of the interleaved hardware path.
inline constexpr size_t kInterleaveBlock = 4096;
// Requires HaveSse42().
uint32_t Sse42(const void* data, size_t n, uint32_t init);
}  // namespace crc32c_internal

}  // namespace kvs

#endif  // KVSESSION_CACHE_CRC32C_H_
