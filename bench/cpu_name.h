// The CPU's model name for benchmark headers ("AMD EPYC 9R14 ..."), from
// /proc/cpuinfo; "unknown CPU" where that is not readable.
#ifndef KVSESSION_BENCH_CPU_NAME_H_
#define KVSESSION_BENCH_CPU_NAME_H_

#include <string>

namespace kvs {

std::string CpuModelName();

}  // namespace kvs

#endif  // KVSESSION_BENCH_CPU_NAME_H_
