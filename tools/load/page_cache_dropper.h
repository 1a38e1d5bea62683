// Drops a directory's files from the kernel's page cache, so that what the
// server reads next comes from the disk: kvs-load's --drop-page-cache makes
// a store's restores cold (the store then reads page files directly, past
// the page cache: cache/page_files.h) while clients write, fork and
// restore, and kill -9 lands in the middle of it.
//
// posix_fadvise(POSIX_FADV_DONTNEED) on every regular file under the
// directory: clean cached pages are dropped, dirty ones are started on their
// way to the disk and stay until written (the kernel's rule), so nothing a
// process wrote is lost or changed; only where its next read comes from.
// Files that vanish while the directory is walked (a RocksDB compaction, a
// page file collected) are skipped. Stateless; thread-safe.
#ifndef KVSESSION_TOOLS_LOAD_PAGE_CACHE_DROPPER_H_
#define KVSESSION_TOOLS_LOAD_PAGE_CACHE_DROPPER_H_

#include <string>

namespace kvs::load {

// The number of files under `dir` (recursively) whose cached pages were
// dropped; 0 if `dir` does not exist.
int DropPageCache(const std::string& dir);

}  // namespace kvs::load

#endif  // KVSESSION_TOOLS_LOAD_PAGE_CACHE_DROPPER_H_
