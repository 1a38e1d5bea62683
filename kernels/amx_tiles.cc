// Compiled with the AMX flags (kernels/CMakeLists.txt): LDTILECFG.
#include "kernels/amx_tiles.h"

#include <cpuid.h>
#include <immintrin.h>

#include "kernels/cpu_features.h"
#include "kernels/packed_q8_0.h"

namespace kvs {
namespace {

thread_local const AmxTileConfig* t_loaded = nullptr;

}  // namespace

AmxTileConfig FullTilesConfig() {
  AmxTileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = 16;
  }
  return config;
}

void UseAmxTileConfig(const AmxTileConfig& config) {
  if (t_loaded == &config) return;
  _tile_loadconfig(&config);
  t_loaded = &config;
}

bool AmxBf16Available() {
  static const bool available = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!AmxAvailable() || !DetectedCpuFeatures().avx512bf16) return false;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((d >> 22) & 1) != 0;  // AMX-BF16
  }();
  return available;
}

}  // namespace kvs
