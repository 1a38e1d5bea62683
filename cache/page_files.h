// PageFiles: the encoded KV pages of a session store, one file per page,
// named for the page's content address (docs/storage-format.md,
// "Pages"):
//
//   <store dir>/pages/<32 lowercase hex digits of the PageHash>.kvpage
//
// A file holds exactly one encoded page (cache/page_codec.h): its header,
// then its payload. A full page's payload has the in-RAM page layout, so a
// restore reads it straight into a pool page (ReadInto): one copy from the
// page cache, no RocksDB buffers, no software checksum.
//
// What this class does not decide: which pages exist. SessionStore keeps
// that in RocksDB (a page's entry there is its header) and calls Write
// before the batch that makes a page referenced, Remove after the batch
// that drops its last reference, and ListOnDisk at startup to collect the
// files a crash left between the two (docs/storage-format.md gives the
// order and why it is crash-safe).
//
// Write is crash-safe on its own: the bytes go to a temporary
// "<hash>.<n>.kvpage.tmp" (unique, so two writers of one page never share
// it), are synced (if asked), then renamed, so a file under its final name
// is always whole; the rename is durable once SyncDir returns. A crash
// leaves at most a temporary, which ListOnDisk reports for deletion.
//
// Writes go straight to the disk (O_DIRECT, PageWrites::kDirect, the
// default) where the file system takes it: the header and payload are
// copied into an aligned buffer kept between writes, written whole (padded
// to the disk's block), and the file cut back to its length. No page-cache
// memory is filled: a page is written for a restore after a restart, which
// reads it back into the pool, the cache that counts; and on a VM that
// gives freed memory back to its host, a buffered write of a new file ran
// at 135 MB/s where a direct one ran at 2-2.8 GB/s (docs/performance/zen5.md,
// "Page files written past the page cache"). Where a direct write cannot be
// made, the write is buffered, as with PageWrites::kBuffered; where the
// file system makes files but opens none for direct writes (no O_DIRECT,
// as on tmpfs), this object writes buffered from then on.
//
// All I/O goes through the given rocksdb::FileSystem (the store's, so the
// fault-injection file system of the tests reaches page files too). Once
// the directory exists (CreateDir, or the first ReadsDirect), it is
// registered with that file system (RegisterDbPaths, undone by the
// destructor): RocksDB's POSIX file system then looks up the disk's block
// size for direct I/O once for the directory, where it otherwise walked
// sysfs at every open (10 readlink calls; on a 2-core Zen 5 VM about 40 us
// an open against 6-10 registered, 1-2 ms of a 2,000-token cold restore:
// docs/performance/zen5.md, "Page files opened for direct I/O without a sysfs
// walk each").
// Errors: NOT_FOUND (no file for the page), RESOURCE_EXHAUSTED (no space),
// INTERNAL (other I/O errors). On a failed Write no file of that name is
// created or changed.
//
// Thread safety: no state besides the directory, the kept direct-I/O buffers
// (under their own mutex), whether the directory is registered (under its
// own) and whether writes go direct; every method is
// safe from any thread. Writing and removing one page from two threads at once
// is the caller's to prevent (the store's mutex does).
#ifndef KVSESSION_CACHE_PAGE_FILES_H_
#define KVSESSION_CACHE_PAGE_FILES_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cache/page_hash.h"

namespace rocksdb {
class FileSystem;
}

namespace kvs {

// How PageFiles writes a page file (see the header comment).
enum class PageWrites { kDirect, kBuffered };

class PageFiles {
 public:
  class DirectBuffer;
  // Files in `dir` (created by CreateDir), through `fs` (not owned; must
  // outlive this object), written as `writes` says.
  PageFiles(std::string dir, rocksdb::FileSystem* fs, PageWrites writes = PageWrites::kDirect);
  ~PageFiles();

  const std::string& dir() const { return dir_; }
  std::string PathOf(const PageHash& hash) const;

  // Creates the directory if missing, and registers it with the file
  // system (see the header comment).
  absl::Status CreateDir() const;

  // Writes `encoded` as the file of `hash`, replacing any file of that
  // name; `sync` syncs the file before the rename. The rename is durable
  // only after SyncDir.
  absl::Status Write(const PageHash& hash, std::string_view encoded, bool sync) const;
  // The same, for an encoding in two parts: `header`, then `payload` (a
  // full page's pool page, written without a copy).
  absl::Status Write(const PageHash& hash, std::string_view header, std::string_view payload,
                     bool sync) const;
  // Whether writes still go straight to the disk: false with
  // PageWrites::kBuffered, or once a direct write could not be made here.
  bool WritesDirect() const { return writes_direct_.load(std::memory_order_relaxed); }
  // Write in two steps, for a writer that must not hold its caller's lock
  // while it writes (staging): WriteTemporary writes (and syncs, if asked)
  // the bytes under a unique temporary name, which it returns; Publish
  // renames that to the file of `hash` (replacing any), which the caller
  // does under its lock; DiscardTemporary deletes it instead. Errors as
  // Write's; on a failed WriteTemporary or Publish nothing is left.
  absl::StatusOr<std::string> WriteTemporary(const PageHash& hash, std::string_view header,
                                             std::string_view payload, bool sync) const;
  absl::Status Publish(const std::string& temporary, const PageHash& hash) const;
  void DiscardTemporary(const std::string& temporary) const;
  // Syncs the directory, making earlier Writes' renames and Removes durable.
  absl::Status SyncDir() const;

  // The whole file of `hash`.
  absl::StatusOr<std::string> Read(const PageHash& hash) const;
  // Reads bytes [0, header_bytes) of the file into `header` and the next
  // payload_bytes into `payload`: a full page straight into its pool page.
  // DATA_LOSS if the file is shorter, or longer, than that.
  absl::Status ReadInto(const PageHash& hash, char* header, size_t header_bytes, char* payload,
                        size_t payload_bytes) const;

  // ReadInto straight from the disk (O_DIRECT), bypassing the page cache:
  // the whole file is read into `buffer` (the caller's, one per reader)
  // and its two parts copied out. A cold restore then waits on the disk
  // alone: the kernel fills no page cache, and the disk's DMA lands in
  // memory the process already holds. Errors as ReadInto's, but
  // UNIMPLEMENTED if the file cannot be read directly at all (a file
  // system without O_DIRECT, or any error of the direct read): the caller
  // then reads it with ReadInto, which reports any real I/O error.
  absl::Status ReadIntoDirect(const PageHash& hash, char* header, size_t header_bytes, char* payload,
                              size_t payload_bytes, DirectBuffer* buffer) const;
  // The whole file of `hash`, read straight from the disk into `buffer` as
  // ReadIntoDirect reads it: a view of its `file_bytes` bytes there, valid
  // until the buffer's next use. For a page whose bytes are decoded rather
  // than placed (a partial page). Errors as ReadIntoDirect's.
  absl::StatusOr<std::string_view> ReadWholeDirect(const PageHash& hash, size_t file_bytes, DirectBuffer* buffer) const;
  // A buffer for a direct read or write of a file of up to `file_bytes`
  // (size() > file_bytes): one kept from an earlier read or write, or a new
  // one (data() null if no memory could be mapped). KeepDirectBuffer keeps
  // it for the next: at most 8, the 4 direct readers of a restore
  // (SessionStore::ReadPages) and as many writers (the service's staging
  // writes from its I/O threads); more are freed. Thread-safe.
  std::unique_ptr<DirectBuffer> TakeDirectBuffer(size_t file_bytes) const;
  void KeepDirectBuffer(std::unique_ptr<DirectBuffer> buffer) const;
  // Whether the file of `hash` can be opened for direct reads here (a file
  // system may still fail the reads: ReadIntoDirect then says
  // UNIMPLEMENTED).
  bool ReadsDirect(const PageHash& hash) const;
  // Whether the page cache holds byte `bytes - 1` of the file of `hash`
  // (nothing is read): a hint that a buffered read would not wait for the
  // disk. False when the file is missing or shorter. Asks cachestat(2)
  // (Linux 6.5) where the kernel has it and allows it (not on overlayfs,
  // where it sees the overlay's empty cache), else mincore of a one-page
  // mapping, whose munmap takes the process's memory-map lock for writing
  // and may shoot down TLBs, which a restore's readers (one call per
  // page) then wait on: on a 2-core
  // Zen 5 VM, cachestat made a cold restore 5% faster (docs/performance/zen5.md,
  // "Restores on this VM kind: three measurements"). Since Linux 5.2 mincore
  // reports every page of a file the process neither owns nor may write
  // as resident, so where it answers for such files this says true (a
  // restore then reads buffered, as before). Plain POSIX calls, not the
  // store's rocksdb::FileSystem: with another file system it says false,
  // and ReadIntoDirect decides.
  bool LikelyCached(const PageHash& hash, uint64_t bytes) const;
  // Whether the file of `hash` exists and begins with `header` (a page's
  // 48-byte header, which holds its payload's length and CRC-32C) and is
  // exactly `bytes` long: a whole file of that very encoding.
  bool Holds(const PageHash& hash, std::string_view header, uint64_t bytes) const;

  // Asks the kernel to start reading the first `bytes` of the file of
  // `hash` into the page cache, and returns without waiting (readahead):
  // a restore hints every page first, so a cold read keeps the disk busy.
  // Only a hint: errors (no such file) are ignored.
  void Prefetch(const PageHash& hash, size_t bytes) const;

  // Deletes the file of `hash`; OK if there is none.
  absl::Status Remove(const PageHash& hash) const;

  // What the directory holds: the pages with a file, and the names of
  // everything else in it (temporaries a crash left, stray files).
  struct Listing {
    std::vector<PageHash> pages;
    std::vector<std::string> others;
  };
  absl::StatusOr<Listing> ListOnDisk() const;
  // Deletes `name` (an entry of Listing::others); OK if already gone.
  absl::Status RemoveOther(const std::string& name) const;

 private:
  // WriteTemporary's direct write of the page into `temporary`; on error
  // nothing is left. RESOURCE_EXHAUSTED: the disk is full. UNIMPLEMENTED:
  // the file could not be opened for direct writes; UNAVAILABLE: a direct
  // write failed otherwise. The caller writes buffered after either, which
  // reports any real I/O error.
  absl::Status WriteDirect(const std::string& temporary, std::string_view header, std::string_view payload,
                           bool sync) const;

  // Registers dir_ with fs_ (RegisterDbPaths) if it is not yet; a
  // directory that does not exist yet is left for a later call.
  void RegisterDir() const;

  const std::string dir_;
  rocksdb::FileSystem* const fs_;
  mutable absl::Mutex register_mu_;
  mutable bool registered_ ABSL_GUARDED_BY(register_mu_) = false;
  mutable std::atomic<uint64_t> next_temporary_{0};
  mutable std::atomic<bool> writes_direct_;
  // Buffers for direct reads and writes, kept between them (TakeDirectBuffer).
  mutable absl::Mutex direct_buffers_mu_;
  mutable std::vector<std::unique_ptr<DirectBuffer>> direct_buffers_ ABSL_GUARDED_BY(direct_buffers_mu_);
};

// Memory for a direct read (ReadIntoDirect: a whole page file of up to
// `file_bytes` and one byte more, to see that the file ends there) or a
// direct write (the page file copied in, padded to the disk's block), in
// whole huge pages (cache/slab_memory.h), written once here so it is
// resident. Huge pages,
// because the kernel pins a direct read's destination page by page: on a
// 2-core Zen 5 VM, 4 readers read 125 page files directly in 24 ms into
// huge pages and 66 ms into 4 KiB pages. data() is null if the memory
// could not be mapped. Owned by one reader or writer at a time; worth
// keeping between them (TakeDirectBuffer, KeepDirectBuffer).
class PageFiles::DirectBuffer {
 public:
  explicit DirectBuffer(size_t file_bytes);
  ~DirectBuffer();
  DirectBuffer(const DirectBuffer&) = delete;
  DirectBuffer& operator=(const DirectBuffer&) = delete;
  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  size_t size_;
  char* data_;
};

}  // namespace kvs

#endif  // KVSESSION_CACHE_PAGE_FILES_H_
