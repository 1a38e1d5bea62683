// Median(v): the middle value of v (the upper one of an even count), 0 for
// none: how the benchmarks' tables sum up repeated runs on noisy machines.
#ifndef KVSESSION_BENCH_MEDIAN_H_
#define KVSESSION_BENCH_MEDIAN_H_

#include <algorithm>
#include <vector>

namespace kvs {

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace kvs

#endif  // KVSESSION_BENCH_MEDIAN_H_
