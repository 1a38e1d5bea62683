#include "bench/page_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <vector>

namespace kvs {
namespace {

constexpr size_t kChunk = size_t{8} << 20;

// Reads the whole file at `path`; returns its bytes (-1 if it cannot).
int64_t ReadFile(const std::string& path, std::vector<char>& buffer) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  int64_t total = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n <= 0) break;
    total += n;
  }
  ::close(fd);
  return total;
}

bool Drop(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ::fdatasync(fd);
  const bool ok = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  ::close(fd);
  return ok;
}

template <typename Fn>
int64_t ForEachFile(const std::string& dir, Fn fn) {
  int64_t bytes = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec)) continue;
    if (fn(e.path().string())) bytes += static_cast<int64_t>(e.file_size(ec));
  }
  return bytes;
}

}  // namespace

int64_t DropFromPageCache(const std::string& dir) { return ForEachFile(dir, Drop); }

int64_t ReadIntoPageCache(const std::string& dir) {
  std::vector<char> buffer(kChunk);
  return ForEachFile(dir, [&](const std::string& path) { return ReadFile(path, buffer) >= 0; });
}

double MeasureColdReadBandwidth(const std::string& path, int64_t bytes, int repeats) {
  std::vector<char> buffer(kChunk);
  for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<char>(i * 2654435761u >> 13);
  {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return 0;
    for (int64_t left = bytes; left > 0;) {
      const ssize_t n = ::write(fd, buffer.data(), static_cast<size_t>(std::min<int64_t>(left, kChunk)));
      if (n <= 0) break;
      left -= n;
    }
    ::fsync(fd);
    ::close(fd);
  }
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    Drop(path);
    const auto start = std::chrono::steady_clock::now();
    const int64_t read = ReadFile(path, buffer);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (read > 0 && s > 0) rates.push_back(static_cast<double>(read) / s);
  }
  std::filesystem::remove(path);
  if (rates.empty()) return 0;
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace kvs
