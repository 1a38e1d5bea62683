#include "cache/page_files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cache/slab_memory.h"
#include "rocksdb/file_system.h"

namespace kvs {
namespace {

constexpr char kSuffix[] = ".kvpage";
constexpr char kTemporarySuffix[] = ".kvpage.tmp";
constexpr size_t kSuffixBytes = sizeof(kSuffix) - 1;
// Buffers kept between direct reads and writes: a restore's direct readers
// (4) and as many writers at once (the service's staging writes from its
// I/O threads).
constexpr size_t kKeptDirectBuffers = 8;

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

absl::Status FromIo(const rocksdb::IOStatus& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  std::string message = absl::StrCat(std::string(what), ": ", s.ToString());
  if (s.IsNotFound() || s.IsPathNotFound()) return absl::NotFoundError(message);
  if (s.IsNoSpace()) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

// The hash a file name "<32 hex>.kvpage" names, if it is one.
std::optional<PageHash> HashOfName(std::string_view name) {
  if (name.size() != 2 * PageHash::kSize + kSuffixBytes || !EndsWith(name, kSuffix)) {
    return std::nullopt;
  }
  std::string bytes(PageHash::kSize, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    int value = 0;
    for (char c : name.substr(2 * i, 2)) {
      int digit;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else {
        return std::nullopt;
      }
      value = value * 16 + digit;
    }
    bytes[i] = static_cast<char>(value);
  }
  return PageHash::FromBytes(bytes);
}

}  // namespace

PageFiles::PageFiles(std::string dir, rocksdb::FileSystem* fs, PageWrites writes)
    : dir_(std::move(dir)), fs_(fs), writes_direct_(writes == PageWrites::kDirect) {}

PageFiles::~PageFiles() {
  absl::MutexLock lock(&register_mu_);
  if (registered_) fs_->UnregisterDbPaths({dir_}).PermitUncheckedError();
}

void PageFiles::RegisterDir() const {
  absl::MutexLock lock(&register_mu_);
  if (registered_) return;
  // The POSIX file system opens the directory to learn its disk's block
  // size: an error (no directory yet) changes nothing, and a later call
  // tries again.
  registered_ = fs_->RegisterDbPaths({dir_}).ok();
}

std::string PageFiles::PathOf(const PageHash& hash) const {
  return absl::StrCat(dir_, "/", hash.hex(), kSuffix);
}

absl::Status PageFiles::CreateDir() const {
  absl::Status s = FromIo(fs_->CreateDirIfMissing(dir_, rocksdb::IOOptions(), nullptr), absl::StrCat("create ", dir_));
  if (s.ok()) RegisterDir();
  return s;
}

absl::Status PageFiles::Write(const PageHash& hash, std::string_view encoded, bool sync) const {
  return Write(hash, encoded, std::string_view(), sync);
}

absl::Status PageFiles::Write(const PageHash& hash, std::string_view header, std::string_view payload,
                              bool sync) const {
  absl::StatusOr<std::string> temporary = WriteTemporary(hash, header, payload, sync);
  if (!temporary.ok()) return temporary.status();
  return Publish(*temporary, hash);
}

absl::StatusOr<std::string> PageFiles::WriteTemporary(const PageHash& hash, std::string_view header,
                                                      std::string_view payload, bool sync) const {
  const std::string temporary =
      absl::StrCat(dir_, "/", hash.hex(), ".", next_temporary_.fetch_add(1), kTemporarySuffix);
  bool direct_open_failed = false;
  if (WritesDirect()) {
    absl::Status direct = WriteDirect(temporary, header, payload, sync);
    if (direct.ok()) return temporary;
    if (absl::IsResourceExhausted(direct)) return direct;
    direct_open_failed = absl::IsUnimplemented(direct);
  }
  const rocksdb::IOOptions io;
  std::unique_ptr<rocksdb::FSWritableFile> file;
  rocksdb::IOStatus s = fs_->NewWritableFile(temporary, rocksdb::FileOptions(), &file, nullptr);
  if (s.ok()) s = file->Append(rocksdb::Slice(header.data(), header.size()), io, nullptr);
  if (s.ok() && !payload.empty()) s = file->Append(rocksdb::Slice(payload.data(), payload.size()), io, nullptr);
  if (s.ok() && sync) s = file->Sync(io, nullptr);
  if (file != nullptr) {
    rocksdb::IOStatus closed = file->Close(io, nullptr);
    if (s.ok()) s = closed;
  }
  if (!s.ok()) {
    DiscardTemporary(temporary);
    return FromIo(s, absl::StrCat("write page file ", PathOf(hash)));
  }
  // The file system makes files but would not open one for direct
  // writes (no O_DIRECT, as on tmpfs): buffered from now on.
  if (direct_open_failed) writes_direct_.store(false, std::memory_order_relaxed);
  return temporary;
}

absl::Status PageFiles::WriteDirect(const std::string& temporary, std::string_view header,
                                    std::string_view payload, bool sync) const {
  const rocksdb::IOOptions io;
  rocksdb::FileOptions options;
  options.use_direct_writes = true;
  std::unique_ptr<rocksdb::FSWritableFile> file;
  rocksdb::IOStatus s = fs_->NewWritableFile(temporary, options, &file, nullptr);
  if (!s.ok()) {
    // No O_DIRECT here (EINVAL), or a failure the buffered write will
    // meet and report again.
    DiscardTemporary(temporary);
    return absl::UnimplementedError("cannot open for direct writes");
  }
  // The whole file in one aligned write: offset 0, a length in whole
  // blocks of the disk (and of 4 KiB, the most common), the buffer
  // huge-page aligned; then the file is cut back to its length.
  const size_t file_bytes = header.size() + payload.size();
  const size_t block = std::max<size_t>(4096, file->GetRequiredBufferAlignment());
  const size_t written = (file_bytes + block - 1) / block * block;
  std::unique_ptr<DirectBuffer> buffer = TakeDirectBuffer(written);
  if (buffer->data() == nullptr || buffer->size() < written || reinterpret_cast<uintptr_t>(buffer->data()) % block) {
    file->Close(io, nullptr).PermitUncheckedError();
    DiscardTemporary(temporary);
    return absl::UnavailableError("no buffer for a direct write");
  }
  std::memcpy(buffer->data(), header.data(), header.size());
  if (!payload.empty()) std::memcpy(buffer->data() + header.size(), payload.data(), payload.size());
  std::memset(buffer->data() + file_bytes, 0, written - file_bytes);
  s = file->Append(rocksdb::Slice(buffer->data(), written), io, nullptr);
  KeepDirectBuffer(std::move(buffer));
  if (s.ok()) s = file->Truncate(file_bytes, io, nullptr);
  if (s.ok() && sync) s = file->Sync(io, nullptr);
  rocksdb::IOStatus closed = file->Close(io, nullptr);
  if (s.ok()) s = closed;
  // Cutting the file back put its last block in the page cache (the file
  // system zeroes what lies past the new end), which would tell a restore
  // that the file is cached (LikelyCached asks about the last byte): drop
  // it (plain POSIX, as LikelyCached; RocksDB's InvalidateCache does
  // nothing for a direct file). Only a synced block can be dropped: without
  // `sync` it may stay.
  if (s.ok()) {
    const int fd = ::open(temporary.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      ::close(fd);
    }
  }
  if (s.ok()) return absl::OkStatus();
  DiscardTemporary(temporary);
  // A full disk is the caller's answer; anything else (a device that
  // refuses this alignment, an I/O error) is tried again buffered, which
  // reports a real error itself.
  if (s.IsNoSpace()) return FromIo(s, absl::StrCat("write page file ", temporary));
  return absl::UnavailableError("direct write failed");
}

std::unique_ptr<PageFiles::DirectBuffer> PageFiles::TakeDirectBuffer(size_t file_bytes) const {
  {
    absl::MutexLock lock(&direct_buffers_mu_);
    for (auto it = direct_buffers_.begin(); it != direct_buffers_.end(); ++it) {
      if ((*it)->size() > file_bytes) {
        std::unique_ptr<DirectBuffer> buffer = std::move(*it);
        direct_buffers_.erase(it);
        return buffer;
      }
    }
  }
  return std::make_unique<DirectBuffer>(file_bytes);
}

void PageFiles::KeepDirectBuffer(std::unique_ptr<DirectBuffer> buffer) const {
  if (buffer == nullptr || buffer->data() == nullptr) return;
  absl::MutexLock lock(&direct_buffers_mu_);
  if (direct_buffers_.size() < kKeptDirectBuffers) direct_buffers_.push_back(std::move(buffer));
}

absl::Status PageFiles::Publish(const std::string& temporary, const PageHash& hash) const {
  const std::string path = PathOf(hash);
  rocksdb::IOStatus s = fs_->RenameFile(temporary, path, rocksdb::IOOptions(), nullptr);
  if (!s.ok()) {
    DiscardTemporary(temporary);
    return FromIo(s, absl::StrCat("write page file ", path));
  }
  return absl::OkStatus();
}

void PageFiles::DiscardTemporary(const std::string& temporary) const {
  fs_->DeleteFile(temporary, rocksdb::IOOptions(), nullptr).PermitUncheckedError();
}

absl::Status PageFiles::SyncDir() const {
  std::unique_ptr<rocksdb::FSDirectory> dir;
  rocksdb::IOStatus s = fs_->NewDirectory(dir_, rocksdb::IOOptions(), &dir, nullptr);
  if (s.ok()) s = dir->Fsync(rocksdb::IOOptions(), nullptr);
  if (dir != nullptr) dir->Close(rocksdb::IOOptions(), nullptr).PermitUncheckedError();
  return FromIo(s, absl::StrCat("sync ", dir_));
}

absl::StatusOr<std::string> PageFiles::Read(const PageHash& hash) const {
  const std::string path = PathOf(hash);
  const rocksdb::IOOptions io;
  uint64_t size = 0;
  rocksdb::IOStatus s = fs_->GetFileSize(path, io, &size, nullptr);
  if (!s.ok()) return FromIo(s, absl::StrCat("page file ", path));
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  s = fs_->NewRandomAccessFile(path, rocksdb::FileOptions(), &file, nullptr);
  if (!s.ok()) return FromIo(s, absl::StrCat("page file ", path));
  std::string bytes(size, '\0');
  rocksdb::Slice got;
  s = file->Read(0, size, io, &got, bytes.data(), nullptr);
  if (!s.ok()) return FromIo(s, absl::StrCat("read page file ", path));
  if (got.size() != size) {
    return absl::DataLossError(
        absl::StrCat("page file ", path, ": read ", got.size(), " of ", size, " bytes"));
  }
  if (got.data() != bytes.data()) std::memcpy(bytes.data(), got.data(), got.size());
  return bytes;
}

absl::Status PageFiles::ReadInto(const PageHash& hash, char* header, size_t header_bytes,
                                 char* payload, size_t payload_bytes) const {
  const std::string path = PathOf(hash);
  const rocksdb::IOOptions io;
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  rocksdb::IOStatus s = fs_->NewRandomAccessFile(path, rocksdb::FileOptions(), &file, nullptr);
  if (!s.ok()) return FromIo(s, absl::StrCat("page file ", path));
  const struct {
    uint64_t offset;
    size_t bytes;
    char* to;
  } parts[] = {{0, header_bytes, header}, {header_bytes, payload_bytes, payload},
               {header_bytes + payload_bytes, 1, nullptr}};
  for (const auto& part : parts) {
    char extra;  // a byte past the page: the file must end there
    char* to = part.to != nullptr ? part.to : &extra;
    rocksdb::Slice got;
    s = file->Read(part.offset, part.bytes, io, &got, to, nullptr);
    if (!s.ok()) return FromIo(s, absl::StrCat("read page file ", path));
    if (part.to == nullptr) {
      if (!got.empty()) {
        return absl::DataLossError(absl::StrCat("page file ", path, " is longer than its page"));
      }
      break;
    }
    if (got.size() != part.bytes) {
      return absl::DataLossError(absl::StrCat("page file ", path, " is truncated"));
    }
    if (got.data() != to) std::memcpy(to, got.data(), got.size());
  }
  return absl::OkStatus();
}

bool PageFiles::Holds(const PageHash& hash, std::string_view header, uint64_t bytes) const {
  const std::string path = PathOf(hash);
  const rocksdb::IOOptions io;
  uint64_t size = 0;
  if (!fs_->GetFileSize(path, io, &size, nullptr).ok() || size != bytes) return false;
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  if (!fs_->NewRandomAccessFile(path, rocksdb::FileOptions(), &file, nullptr).ok()) return false;
  std::string stored(header.size(), '\0');
  rocksdb::Slice got;
  if (!file->Read(0, header.size(), io, &got, stored.data(), nullptr).ok()) return false;
  return got.ToStringView() == header;
}

PageFiles::DirectBuffer::DirectBuffer(size_t file_bytes)
    : size_((file_bytes + 1 + kSlabHugePageBytes - 1) / kSlabHugePageBytes * kSlabHugePageBytes),
      data_(reinterpret_cast<char*>(MapAlignedToHugePages(size_))) {
  if (data_ != nullptr) std::memset(data_, 0, size_);
}

PageFiles::DirectBuffer::~DirectBuffer() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

bool PageFiles::ReadsDirect(const PageHash& hash) const {
  RegisterDir();  // a read-only store's directory is not created here
  rocksdb::FileOptions options;
  options.use_direct_reads = true;
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  return fs_->NewRandomAccessFile(PathOf(hash), options, &file, nullptr).ok();
}

absl::Status PageFiles::ReadIntoDirect(const PageHash& hash, char* header, size_t header_bytes, char* payload,
                                       size_t payload_bytes, DirectBuffer* buffer) const {
  absl::StatusOr<std::string_view> file = ReadWholeDirect(hash, header_bytes + payload_bytes, buffer);
  if (!file.ok()) return file.status();
  std::memcpy(header, file->data(), header_bytes);
  std::memcpy(payload, file->data() + header_bytes, payload_bytes);
  return absl::OkStatus();
}

absl::StatusOr<std::string_view> PageFiles::ReadWholeDirect(const PageHash& hash, size_t file_bytes,
                                                            DirectBuffer* buffer) const {
  if (buffer == nullptr || buffer->data() == nullptr || buffer->size() <= file_bytes) {
    return absl::UnimplementedError("no buffer for a direct read");
  }
  const std::string path = PathOf(hash);
  rocksdb::FileOptions options;
  options.use_direct_reads = true;
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  rocksdb::IOStatus s = fs_->NewRandomAccessFile(path, options, &file, nullptr);
  if (s.IsNotFound() || s.IsPathNotFound()) return FromIo(s, absl::StrCat("page file ", path));
  if (!s.ok()) return absl::UnimplementedError("no direct reads");
  // One read from offset 0 of the file's bytes and one more, rounded up to
  // whole blocks (offset, length and buffer aligned): a file of exactly
  // file_bytes ends inside it, so a longer one shows. Not the whole buffer:
  // the file system fills what it is asked for past the file's last block
  // with zeros (ext4 allocates files in 1 MiB steps, so a 975 KB page file
  // asked for 2 MiB zeroed about 1 MiB of the buffer each read: 7% of a
  // cold restore's reading thread under `perf`).
  const size_t block = std::max<size_t>(4096, file->GetRequiredBufferAlignment());
  const size_t asked = (file_bytes + 1 + block - 1) / block * block;
  if (asked > buffer->size() || reinterpret_cast<uintptr_t>(buffer->data()) % block != 0) {
    return absl::UnimplementedError("the buffer does not fit a direct read");
  }
  rocksdb::Slice got;
  s = file->Read(0, asked, rocksdb::IOOptions(), &got, buffer->data(), nullptr);
  if (!s.ok()) return absl::UnimplementedError("direct read failed");
  if (got.size() > file_bytes) {
    return absl::DataLossError(absl::StrCat("page file ", path, " is longer than its page"));
  }
  if (got.size() < file_bytes) return absl::DataLossError(absl::StrCat("page file ", path, " is truncated"));
  return std::string_view(got.data(), got.size());
}

namespace {

// cachestat(2) (Linux 6.5), which Debian 12's headers do not declare yet:
// 451 on x86-64, arm64 and most other architectures.
#ifdef SYS_cachestat
constexpr long kCachestatSyscall = SYS_cachestat;
#else
constexpr long kCachestatSyscall = 451;
#endif
struct CachestatRange {
  uint64_t off;
  uint64_t len;
};
struct Cachestat {
  uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
// Set once cachestat has failed (a kernel without it, a seccomp filter):
// mincore from then on.
std::atomic<bool> cachestat_failed{false};
constexpr long kOverlayfsMagic = 0x794c7630;  // OVERLAYFS_SUPER_MAGIC

// Whether the page cache holds the OS page of `fd` at `at`: cachestat
// where the kernel has it; else mincore of a one-page mapping, which asks
// the page cache without reading anything (a read with RWF_NOWAIT would
// start the readahead it reports missing) but, as any munmap, takes the
// process's memory map lock for writing and may shoot down TLBs. Not
// cachestat on overlayfs: it would ask the overlay file's own cache,
// always empty, where a mapping reaches the real file's.
bool PageCached(int fd, uint64_t at, uint64_t os_page) {
  struct statfs fs {};
  if (!cachestat_failed.load(std::memory_order_relaxed) && ::fstatfs(fd, &fs) == 0 &&
      static_cast<long>(fs.f_type) != kOverlayfsMagic) {
    CachestatRange range{at, os_page};
    Cachestat cs{};
    if (::syscall(kCachestatSyscall, fd, &range, &cs, 0) == 0) return cs.nr_cache > 0;
    cachestat_failed.store(true, std::memory_order_relaxed);
  }
  void* map = ::mmap(nullptr, os_page, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(at));
  if (map == MAP_FAILED) return false;
  unsigned char resident = 0;
  const bool cached = ::mincore(map, os_page, &resident) == 0 && (resident & 1) != 0;
  ::munmap(map, os_page);
  return cached;
}

}  // namespace

bool PageFiles::LikelyCached(const PageHash& hash, uint64_t bytes) const {
  if (bytes == 0) return false;
  const int fd = ::open(PathOf(hash).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const uint64_t os_page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const bool cached = PageCached(fd, (bytes - 1) / os_page * os_page, os_page);
  ::close(fd);
  return cached;
}

void PageFiles::Prefetch(const PageHash& hash, size_t bytes) const {
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  if (!fs_->NewRandomAccessFile(PathOf(hash), rocksdb::FileOptions(), &file, nullptr).ok()) return;
  file->Prefetch(0, bytes, rocksdb::IOOptions(), nullptr).PermitUncheckedError();
}

absl::Status PageFiles::Remove(const PageHash& hash) const {
  const std::string path = PathOf(hash);
  rocksdb::IOStatus s = fs_->DeleteFile(path, rocksdb::IOOptions(), nullptr);
  if (s.IsNotFound() || s.IsPathNotFound()) return absl::OkStatus();
  return FromIo(s, absl::StrCat("delete page file ", path));
}

absl::StatusOr<PageFiles::Listing> PageFiles::ListOnDisk() const {
  std::vector<std::string> names;
  rocksdb::IOStatus s = fs_->GetChildren(dir_, rocksdb::IOOptions(), &names, nullptr);
  if (s.IsNotFound() || s.IsPathNotFound()) return Listing();
  if (!s.ok()) return FromIo(s, absl::StrCat("list ", dir_));
  Listing listing;
  for (std::string& name : names) {
    if (name == "." || name == "..") continue;
    if (std::optional<PageHash> hash = HashOfName(name)) {
      listing.pages.push_back(*hash);
    } else {
      listing.others.push_back(std::move(name));
    }
  }
  return listing;
}

absl::Status PageFiles::RemoveOther(const std::string& name) const {
  const std::string path = absl::StrCat(dir_, "/", name);
  rocksdb::IOStatus s = fs_->DeleteFile(path, rocksdb::IOOptions(), nullptr);
  if (s.IsNotFound() || s.IsPathNotFound()) return absl::OkStatus();
  return FromIo(s, absl::StrCat("delete ", path));
}

}  // namespace kvs
