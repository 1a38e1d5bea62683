// kvs-bench-kernels cases for CRC-32C (cache/crc32c.h), the check of every
// page a restore reads and every page a snapshot writes, by each of its
// implementations, GB/s of input:
//   crc32c/<impl>/page/<bytes>     one page's payload again and again (974,848
//                                  bytes: a q8_0 page of the Qwen3-0.6B shape;
//                                  1,835,008: an f16 one), from cache
//   crc32c/<impl>/restore/<pages>  125 q8_0 pages one after another, 121.8 MB
//                                  from memory: a 2,000-token restore's checks
// <impl> is `portable` (tables), `sse42` (the CRC instruction, three
// streams), `avx2_clmul` or `avx512_clmul` (the carry-less fold in 256- or
// 512-bit registers); a case the CPU lacks the instructions for is
// skipped. `Crc32c` takes the last one this CPU has.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cache/crc32c.h"

namespace kvs {
namespace {

using CrcFn = uint32_t (*)(const void*, size_t, uint32_t);

struct Impl {
  const char* name;
  CrcFn fn;
  bool (*available)();
};

bool Always() { return true; }

const Impl kImpls[] = {
    {"portable", crc32c_internal::Portable, Always},
    {"sse42", crc32c_internal::Sse42, crc32c_internal::HaveSse42},
    {"avx2_clmul", crc32c_internal::Avx2Clmul, crc32c_internal::HaveAvx2Clmul},
    {"avx512_clmul", crc32c_internal::Avx512Clmul, crc32c_internal::HaveAvx512Clmul},
};

std::vector<uint8_t> Bytes(size_t n) {
  std::vector<uint8_t> v(n);
  uint32_t x = 12345;
  for (uint8_t& b : v) {
    x = x * 1103515245u + 12345u;
    b = static_cast<uint8_t>(x >> 16);
  }
  return v;
}

// `pages` pages of `page_bytes`, each checked once per iteration.
void Check(benchmark::State& state, const Impl& impl, size_t page_bytes, int pages) {
  if (!impl.available()) {
    state.SkipWithError("this CPU lacks the instructions");
    return;
  }
  const std::vector<uint8_t> data = Bytes(page_bytes * pages);
  uint32_t sink = 0;
  for (auto _ : state) {
    for (int p = 0; p < pages; ++p) sink ^= impl.fn(data.data() + page_bytes * p, page_bytes, 0);
    benchmark::DoNotOptimize(sink);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(page_bytes) * pages);
}

const bool registered = [] {
  const auto configure = [](benchmark::internal::Benchmark* b) {
    b->Repetitions(5)->ReportAggregatesOnly(true)->UseRealTime()->Unit(benchmark::kMicrosecond);
  };
  for (const Impl& impl : kImpls) {
    const std::string prefix = std::string("crc32c/") + impl.name;
    for (size_t bytes : {size_t{974848}, size_t{1835008}}) {
      configure(benchmark::RegisterBenchmark((prefix + "/page/" + std::to_string(bytes)).c_str(), Check, impl,
                                             bytes, 1));
    }
    configure(benchmark::RegisterBenchmark((prefix + "/restore/125").c_str(), Check, impl, size_t{974848}, 125));
  }
  return true;
}();

}  // namespace
}  // namespace kvs
