// AMX tile configurations shared by the kernels that use AMX (the packed
// Q8_0 product, attention): which configuration a thread's tile registers
// hold, so that a kernel loads its own only when another kernel's is
// loaded, and whether the CPU's AMX has BF16 products.
//
// A configuration is a static object of the kernel that owns it; a thread
// remembers the last one it loaded (by address), so two kernels that
// alternate on one thread each reload theirs, and a kernel that runs again
// does not. Call UseAmxTileConfig only where AmxAvailable()
// (packed_q8_0.h) holds.
//
// Thread safety: the loaded configuration is per thread (as the tile
// registers are); the configurations themselves are immutable.
#ifndef KVSESSION_KERNELS_AMX_TILES_H_
#define KVSESSION_KERNELS_AMX_TILES_H_

#include <cstdint>

namespace kvs {

// The 64-byte LDTILECFG operand (palette 1): tile t has rows[t] rows of
// colsb[t] bytes.
struct alignas(64) AmxTileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(AmxTileConfig) == 64);

// Every tile 16 rows of 64 bytes (the largest).
AmxTileConfig FullTilesConfig();

// Loads `config` into this thread's tile registers unless it is already
// the loaded one. `config` must outlive every call that uses it (a static
// object).
void UseAmxTileConfig(const AmxTileConfig& config);

// GCC's _tile_loadd is an asm statement that names no memory operand, so
// the compiler may move stores to a buffer past the tile load that reads
// it, or drop them as unread. Call this between such stores and the load
// (a compiler barrier: no instruction). _tile_stored names memory.
inline void StoresBeforeTileLoads() { asm volatile("" ::: "memory"); }

// True when AmxAvailable() and the CPU has AMX-BF16 (TDPBF16PS) and
// AVX512-BF16 (the conversions around it). Decided once per process.
bool AmxBf16Available();

}  // namespace kvs

#endif  // KVSESSION_KERNELS_AMX_TILES_H_
