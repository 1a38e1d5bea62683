// Tests only: the kernel's transparent-huge-page mode, and what
// /proc/self/smaps says of this process's mappings.
#ifndef KVSESSION_CACHE_HUGE_PAGES_TEST_UTIL_H_
#define KVSESSION_CACHE_HUGE_PAGES_TEST_UTIL_H_

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace kvs {

// The kernel's transparent-huge-page mode: "always", "madvise", "never",
// or "" where the kernel has none.
inline std::string TransparentHugePageMode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(f, line);
  const size_t open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos) return "";
  return line.substr(open + 1, close - open - 1);
}

// True if the kernel gives huge pages to memory advised MADV_HUGEPAGE.
inline bool KernelOffersHugePages() {
  const std::string mode = TransparentHugePageMode();
  return mode == "always" || mode == "madvise";
}

// Calls field(name, value) for each "Name: value" line of every mapping
// in /proc/self/smaps that overlaps [lo, hi); false if it cannot be read.
template <class Field>
bool ForEachSmapsField(uintptr_t lo, uintptr_t hi, Field field) {
  std::ifstream f("/proc/self/smaps");
  if (!f) return false;
  std::string line;
  bool overlapping = false;
  while (std::getline(f, line)) {
    uintptr_t start = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> start >> dash >> end && dash == '-') {
      overlapping = start < hi && end > lo;
      continue;
    }
    const size_t colon = line.find(':');
    if (overlapping && colon != std::string::npos) field(line.substr(0, colon), line.substr(colon + 1));
  }
  return true;
}

// The "THPeligible:" field of the mapping that holds `p`, or -1.
inline int ThpEligible(const void* p) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  int eligible = -1;
  ForEachSmapsField(at, at + 1, [&](const std::string& name, const std::string& value) {
    if (name == "THPeligible") eligible = std::stoi(value);
  });
  return eligible;
}

// The AnonHugePages bytes of every mapping that overlaps [begin, begin +
// bytes), or -1 if /proc/self/smaps cannot be read.
inline int64_t AnonHugeBytesOverlapping(const void* begin, size_t bytes) {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(begin);
  int64_t total = 0;
  const bool read = ForEachSmapsField(lo, lo + bytes, [&](const std::string& name, const std::string& value) {
    if (name == "AnonHugePages") total += std::stoll(value) * 1024;  // "   2048 kB"
  });
  return read ? total : -1;
}

}  // namespace kvs

#endif  // KVSESSION_CACHE_HUGE_PAGES_TEST_UTIL_H_
