#include "kernels/cpu_features.h"

#include <cpuid.h>
#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <string_view>
#include <thread>

#include "kernels/kernel_table.h"

namespace kvs {
namespace {

CpuFeatures Detect() {
  __builtin_cpu_init();
  CpuFeatures f;
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  // CPUID.1:ECX.F16C[bit 29]: clang (the fuzz build) has no "f16c" for
  // __builtin_cpu_supports; only used together with avx2, whose check covers
  // the OS's AVX state support.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  f.f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
  // KVS_AVX512_BF16=0 runs the AVX-512 level as on a CPU without BF16.
  const char* bf16 = std::getenv("KVS_AVX512_BF16");
  f.avx512bf16 = __builtin_cpu_supports("avx512bf16") && !(bf16 != nullptr && std::string_view(bf16) == "0");
  return f;
}

KernelIsa InitialIsa() {
  KernelIsa isa = BestKernelIsa();
  if (const char* env = std::getenv("KVS_KERNELS")) {
    std::optional<KernelIsa> wanted = ParseKernelIsa(env);
    if (wanted && KernelIsaSupported(*wanted)) isa = *wanted;
  }
  return isa;
}

std::atomic<KernelIsa>& ActiveIsaSlot() {
  static std::atomic<KernelIsa> slot{InitialIsa()};
  return slot;
}

}  // namespace

const CpuFeatures& DetectedCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

int AvailableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::thread::hardware_concurrency());
}

bool KernelIsaSupported(KernelIsa isa) {
  const CpuFeatures& f = DetectedCpuFeatures();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  switch (isa) {
    case KernelIsa::kScalar: return true;
    case KernelIsa::kAvx2: return avx2;
    case KernelIsa::kAvx512:
      return avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni;
  }
  return false;
}

KernelIsa BestKernelIsa() {
  if (KernelIsaSupported(KernelIsa::kAvx512)) return KernelIsa::kAvx512;
  if (KernelIsaSupported(KernelIsa::kAvx2)) return KernelIsa::kAvx2;
  return KernelIsa::kScalar;
}

KernelIsa ActiveKernelIsa() { return ActiveIsaSlot().load(std::memory_order_relaxed); }

const char* KernelIsaName(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kScalar: return "scalar";
    case KernelIsa::kAvx2: return "avx2";
    case KernelIsa::kAvx512: return "avx512";
  }
  return "scalar";
}

const char* ActiveKernelsName() { return kernel_table::ActiveKernelTable().name; }

std::optional<KernelIsa> ParseKernelIsa(std::string_view name) {
  if (name == "scalar") return KernelIsa::kScalar;
  if (name == "avx2") return KernelIsa::kAvx2;
  if (name == "avx512") return KernelIsa::kAvx512;
  return std::nullopt;
}

bool ForceKernelIsa(KernelIsa isa) {
  if (!KernelIsaSupported(isa)) return false;
  ActiveIsaSlot().store(isa, std::memory_order_relaxed);
  return true;
}

}  // namespace kvs
