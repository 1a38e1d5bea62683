// Which SIMD kernels this process runs: the CPU's features, detected once,
// and the instruction-set level chosen from them.
//
// Levels (each implies the ones below it):
//   kAvx512: AVX-512 F, BW, VL, DQ and VNNI, plus FMA and F16C. AVX512-BF16
//            is used where present (the BF16 weights' fast path) but not
//            required; a q8_0 cache's values take VNNI's VPDPWSSD either
//            way (attention_q8_0_values.h). The environment
//            variable KVS_AVX512_BF16=0 makes the process run as on a CPU
//            without it (DetectedCpuFeatures().avx512bf16 is then false).
//   kAvx2:   AVX2, FMA and F16C (Haswell and later, every Zen).
//   kScalar: any x86-64; the portable reference kernels.
//
// The level is the best one the CPU supports unless the environment variable
// KVS_KERNELS names a lower one ("scalar", "avx2", "avx512"); a level the CPU
// lacks, or an unknown name, is ignored. Every kernel, packed Q8_0
// included, dispatches through the active level's table (kernel_table.h), so
// KVS_KERNELS=scalar runs the scalar reference everywhere. The AVX-512 level
// also uses AMX for prefill-sized packed Q8_0 products where the CPU and
// Linux allow it, unless the environment variable KVS_AMX is "0"; that is
// decided once per process and shows in ActiveKernelsName() ("avx512+amx"). Tests and benchmarks may switch the
// level with ForceKernelIsa; the switch is atomic, but results computed
// under different levels differ in rounding, so switch only while no kernel
// is running.
//
// How the SIMD code stays safe on older CPUs (the rule for every
// *_avx2.cc / *_avx512*.cc file): those files are compiled with their ISA
// flags and must not emit any function another file could also emit
// (inline functions or templates from shared headers, std:: algorithms),
// because the linker keeps one copy of such a function for the whole
// program and might pick the AVX-512 one. They keep every helper in an
// anonymous namespace (the simd_*.h headers are written that way) and
// publish plain function pointers through kernel_table.h.
#ifndef KVSESSION_KERNELS_CPU_FEATURES_H_
#define KVSESSION_KERNELS_CPU_FEATURES_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace kvs {

enum class KernelIsa : uint8_t { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
};

// The features of the CPU this process runs on (detected on first call).
const CpuFeatures& DetectedCpuFeatures();

// The cores this process may run on now: its CPU affinity (taskset, a
// cgroup's cpuset), not the machine's core count; hardware_concurrency()
// where the affinity cannot be read. Asked of the kernel on every call.
int AvailableCores();

// True if the CPU can run kernels of level `isa`.
bool KernelIsaSupported(KernelIsa isa);

// The best level the CPU supports.
KernelIsa BestKernelIsa();

// The level the kernels use now (best, or KVS_KERNELS, or forced).
KernelIsa ActiveKernelIsa();

// "scalar", "avx2" or "avx512".
const char* KernelIsaName(KernelIsa isa);
// The active kernels as reported by GetServerInfo and the benchmarks:
// KernelIsaName(ActiveKernelIsa()), plus "+amx" when that level's table
// uses AMX and "+bf16" when it uses AVX512-BF16.
const char* ActiveKernelsName();

// Parses "scalar" / "avx2" / "avx512"; nullopt for anything else.
std::optional<KernelIsa> ParseKernelIsa(std::string_view name);

// Makes `isa` the active level. Returns false (and changes nothing) when the
// CPU does not support it.
bool ForceKernelIsa(KernelIsa isa);

}  // namespace kvs

#endif  // KVSESSION_KERNELS_CPU_FEATURES_H_
