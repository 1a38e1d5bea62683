// Page-cache helpers for the restore benchmark: drop files from the page
// cache (posix_fadvise POSIX_FADV_DONTNEED after fdatasync, so the next read
// goes to the disk), and measure the disk's sequential read bandwidth the
// same way. Linux only; not thread-safe with writers of the same files.
#ifndef KVSESSION_BENCH_PAGE_CACHE_H_
#define KVSESSION_BENCH_PAGE_CACHE_H_

#include <cstdint>
#include <string>

namespace kvs {

// Drops every regular file under `dir` (recursively) from the page cache.
// Returns the bytes of the files dropped.
int64_t DropFromPageCache(const std::string& dir);

// Reads every regular file under `dir` once (so it is in the page cache).
// Returns the bytes read.
int64_t ReadIntoPageCache(const std::string& dir);

// ReadIntoPageCache(dir) if `cached`, else DropFromPageCache(dir): a store
// made warm or cold before a restart.
inline void SetPageCached(const std::string& dir, bool cached) {
  if (cached) {
    ReadIntoPageCache(dir);
  } else {
    DropFromPageCache(dir);
  }
}

// Writes a `bytes`-long file at `path` (synced), then `repeats` times drops
// it from the page cache and reads it back sequentially; returns the median
// read bandwidth in bytes per second (0 if the file cannot be written).
// Deletes the file.
double MeasureColdReadBandwidth(const std::string& path, int64_t bytes, int repeats);

}  // namespace kvs

#endif  // KVSESSION_BENCH_PAGE_CACHE_H_
