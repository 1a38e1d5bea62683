// SessionStore's reads (session_store.h): records (GetSession,
// GetCheckpoint) and pages (GetPage, ReadPage, ReadPages for a restore),
// from RocksDB and the page files, under the shared database lock.
#include "cache/session_store.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>

#include "absl/strings/str_cat.h"

#include "rocksdb/db.h"
#include "rocksdb/options.h"

#include "cache/session_store_internal.h"

namespace kvs {
namespace {

// Readers when pages are read from the disk directly (measured on a 2-core
// VM's virtio disk: 2 readers 37 ms, 4 readers 27 ms, 8 readers 26 ms for
// 125 page files of 952 KiB). Their buffers are kept between restores by
// PageFiles (TakeDirectBuffer).
constexpr int kDirectReaders = 4;

}  // namespace

using session_store_internal::FromRocks;
using session_store_internal::ReadRecord;

namespace {

// A format-2 page entry: the page's header alone (a page always has a
// payload, so a format-1 entry, the whole page, is longer).
bool IsPageFileEntry(std::string_view value) { return value.size() == kPageHeaderBytes; }

template <typename Record>
absl::StatusOr<Record> GetRecord(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* family,
                                 std::string_view kind, const std::string& id) {
  std::string value;
  rocksdb::Status s = db->Get(rocksdb::ReadOptions(), family, id, &value);
  if (s.IsNotFound()) {
    return absl::NotFoundError(absl::StrCat(std::string(kind), " '", id, "' not found"));
  }
  if (!s.ok()) return FromRocks(s, absl::StrCat("read ", std::string(kind), " '", id, "'"));
  Record record;
  VerifiedPages pages;
  if (absl::Status r = ReadRecord(id, value, &record, &pages); !r.ok()) return r;
  return record;
}

}  // namespace

absl::StatusOr<std::string> SessionStore::ResolvePage(const PageHash& hash,
                                                      std::string_view value) const {
  if (!IsPageFileEntry(value)) return std::string(value);
  absl::StatusOr<std::string> file = page_files_.Read(hash);
  if (absl::IsNotFound(file.status())) {
    return absl::DataLossError(absl::StrCat("page ", hash.hex(), " missing: no page file"));
  }
  if (!file.ok()) return file.status();
  if (std::string_view(*file).substr(0, value.size()) != value) {
    return absl::DataLossError(
        absl::StrCat("page ", hash.hex(), ": its file's header differs from the stored one"));
  }
  return file;
}

absl::StatusOr<SessionRecord> SessionStore::GetSession(const std::string& id) const {
  absl::ReaderMutexLock db_lock(&db_mu_);
  if (db_ == nullptr) return Reopening();
  return GetRecord<SessionRecord>(db_.get(), sessions_cf_, "session", id);
}

absl::StatusOr<CheckpointRecord> SessionStore::GetCheckpoint(const std::string& id) const {
  absl::ReaderMutexLock db_lock(&db_mu_);
  if (db_ == nullptr) return Reopening();
  return GetRecord<CheckpointRecord>(db_.get(), checkpoints_cf_, "checkpoint", id);
}

absl::StatusOr<std::string> SessionStore::GetPage(const PageHash& hash) const {
  absl::ReaderMutexLock db_lock(&db_mu_);
  if (db_ == nullptr) return Reopening();
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), pages_cf_, rocksdb::Slice(hash.view()),
                               &value);
  if (!s.ok()) return FromRocks(s, absl::StrCat("page ", hash.hex()));
  return ResolvePage(hash, value);
}

absl::Status SessionStore::ReadPage(const PageHash& hash, const KvGeometry& geometry,
                                     int n_tokens, uint8_t* page) const {
  absl::StatusOr<std::string> encoded = GetPage(hash);
  if (absl::IsNotFound(encoded.status())) {
    return absl::DataLossError(absl::StrCat("page ", hash.hex(), " missing"));
  }
  if (!encoded.ok()) return encoded.status();
  int stored_tokens = 0;
  if (absl::Status s = DecodePage(geometry, *encoded, page, &stored_tokens); !s.ok()) {
    return absl::DataLossError(absl::StrCat("page ", hash.hex(), ": ", std::string(s.message())));
  }
  if (stored_tokens != n_tokens) {
    return absl::DataLossError(absl::StrCat("page ", hash.hex(), " holds ", stored_tokens,
                                            " tokens, the record needs ", n_tokens));
  }
  return absl::OkStatus();
}

bool SessionStore::DirectReadFits(const PageHash& hash, size_t file_bytes, const PageFiles::DirectBuffer* direct,
                                  const std::atomic<bool>* direct_works) const {
  return direct != nullptr && (direct_works == nullptr || direct_works->load(std::memory_order_relaxed)) &&
         !page_files_.LikelyCached(hash, file_bytes);
}

bool SessionStore::NoteDirectReadUnavailable(const absl::Status& status, std::atomic<bool>* direct_works) {
  if (!absl::IsUnimplemented(status)) return false;
  if (direct_works != nullptr) direct_works->store(false, std::memory_order_relaxed);
  return true;
}

absl::Status SessionStore::ReadStoredPageInto(const PageRead& read, const KvGeometry& geometry,
                                              std::string_view value, int* stored_tokens,
                                              PageFiles::DirectBuffer* direct,
                                              std::atomic<bool>* direct_works) const {
  if (!IsPageFileEntry(value)) return DecodePageInto(geometry, value, read.page, stored_tokens);
  if (read.n_tokens != geometry.page_tokens) {
    // A partial page (a sequence's last): its payload is packed, not in
    // the pool page's layout, so it is decoded from the whole file. Read
    // cold, that goes into the reader's direct buffer (mapped and resident
    // already), not into fresh memory, whose page faults cost a cold
    // restore more than the page's read did (docs/performance/zen5.md,
    // "A cold restore's partial last page read past the page cache too").
    const size_t file_bytes = EncodedPageBytes(geometry, read.n_tokens);
    if (DirectReadFits(read.hash, file_bytes, direct, direct_works)) {
      absl::StatusOr<std::string_view> file = page_files_.ReadWholeDirect(read.hash, file_bytes, direct);
      if (file.ok()) {
        if (file->substr(0, kPageHeaderBytes) != value) {
          return absl::DataLossError("its file's header differs from the stored one");
        }
        return DecodePageInto(geometry, *file, read.page, stored_tokens);
      }
      if (!NoteDirectReadUnavailable(file.status(), direct_works)) return file.status();
    }
    absl::StatusOr<std::string> encoded = ResolvePage(read.hash, value);
    if (!encoded.ok()) return encoded.status();
    return DecodePageInto(geometry, *encoded, read.page, stored_tokens);
  }
  // A full page: its payload is the pool page, read straight into it.
  char header[kPageHeaderBytes];
  const size_t payload_bytes = PagePayloadBytes(geometry, geometry.page_tokens);
  absl::Status s = absl::UnimplementedError("buffered");
  if (DirectReadFits(read.hash, sizeof(header) + payload_bytes, direct, direct_works)) {
    s = page_files_.ReadIntoDirect(read.hash, header, sizeof(header), reinterpret_cast<char*>(read.page),
                                   payload_bytes, direct);
    NoteDirectReadUnavailable(s, direct_works);
  }
  if (absl::IsUnimplemented(s)) {
    s = page_files_.ReadInto(read.hash, header, sizeof(header), reinterpret_cast<char*>(read.page), payload_bytes);
  }
  if (!s.ok()) return s;
  if (std::string_view(header, sizeof(header)) != value) {
    return absl::DataLossError("its file's header differs from the stored one");
  }
  absl::StatusOr<EncodedPageInfo> info = CheckSplitPage(
      geometry, std::string_view(header, sizeof(header)), read.page, payload_bytes);
  if (!info.ok()) return info.status();
  FullPageToPoolLayout(geometry, info->version, read.page);  // a page written before format 3
  *stored_tokens = info->n_tokens;
  return absl::OkStatus();
}

absl::Status SessionStore::ReadPages(std::span<const PageRead> reads, const KvGeometry& geometry,
                                     int threads, size_t* failed_index) const {
  // Pages pinned at once per thread: 8 x 1.8 MB for a Qwen3-0.6B page.
  constexpr size_t kBatch = 8;
  absl::ReaderMutexLock db_lock(&db_mu_);
  if (db_ == nullptr) {
    if (failed_index != nullptr) *failed_index = 0;
    return Reopening();
  }
  rocksdb::ReadOptions options;
  // RocksDB's checksums stay on: they cover the page entries (a header
  // each, so cheap) and, for format-1 pages, the blob index and the blob
  // record's copy of the key, so a damaged index can never hand back
  // another page of the same size (docs/performance/restore.md,
  // "Restore").
  options.verify_checksums = true;
  options.fill_cache = false;
  std::vector<absl::Status> results(reads.size());
  const size_t n_batches = (reads.size() + kBatch - 1) / kBatch;
  // A cold restore (the first full page's file is not in the page cache)
  // reads full pages the page cache does not hold straight from the disk,
  // where the file system allows (PageFiles::ReadIntoDirect): the kernel
  // then fills no page cache first, which on a 2-core Zen 5 VM made a cold
  // restore of 125 page files 2-3x slower than the disk
  // (docs/performance/zen5.md, "Cold restores read past the page cache").
  // Direct reads wait on the disk, not the CPU: kDirectReaders keep that
  // many in flight whatever `threads` is. A warm restore reads as before.
  const size_t file_bytes = EncodedPageBytes(geometry, geometry.page_tokens);
  size_t full_page = reads.size();
  for (size_t i = 0; i < reads.size() && full_page == reads.size(); ++i) {
    if (reads[i].n_tokens == geometry.page_tokens) full_page = i;
  }
  const bool direct = full_page < reads.size() && !page_files_.LikelyCached(reads[full_page].hash, file_bytes) &&
                      page_files_.ReadsDirect(reads[full_page].hash);
  // Otherwise every page file is hinted to the kernel first, from a thread
  // of its own (a hint may wait for a slot in the disk's queue): read cold,
  // the disk then has every page's read in flight instead of one per
  // reader.
  std::atomic<bool> direct_works{direct};
  std::atomic<bool> done{false};
  std::thread prefetcher;
  if (reads.size() > 1 && !direct) {
    prefetcher = std::thread([&] {
      for (const PageRead& read : reads) {
        if (done.load(std::memory_order_relaxed)) break;
        page_files_.Prefetch(read.hash, EncodedPageBytes(geometry, read.n_tokens));
      }
    });
  }
  std::atomic<size_t> next_batch{0};
  auto worker = [&] {
    std::unique_ptr<PageFiles::DirectBuffer> buffer;
    if (direct) buffer = page_files_.TakeDirectBuffer(file_bytes);
    std::vector<rocksdb::Slice> keys(kBatch);
    std::vector<rocksdb::PinnableSlice> values(kBatch);
    std::vector<rocksdb::Status> statuses(kBatch);
    for (size_t b; (b = next_batch.fetch_add(1)) < n_batches;) {
      const size_t first = b * kBatch, n = std::min(kBatch, reads.size() - first);
      for (size_t i = 0; i < n; ++i) keys[i] = rocksdb::Slice(reads[first + i].hash.view());
      db_->MultiGet(options, pages_cf_, n, keys.data(), values.data(), statuses.data());
      for (size_t i = 0; i < n; ++i) {
        const PageRead& read = reads[first + i];
        absl::Status& result = results[first + i];
        if (statuses[i].IsNotFound()) {
          result = absl::DataLossError(absl::StrCat("page ", read.hash.hex(), " missing"));
        } else if (!statuses[i].ok()) {
          result = FromRocks(statuses[i], absl::StrCat("page ", read.hash.hex()));
        } else {
          int stored_tokens = 0;
          result = ReadStoredPageInto(read, geometry, values[i].ToStringView(), &stored_tokens, buffer.get(),
                                      &direct_works);
          if (absl::IsNotFound(result)) {
            result = absl::DataLossError(absl::StrCat("page ", read.hash.hex(), " missing: no page file"));
          } else if (!result.ok()) {
            // DATA_LOSS for damage; an I/O error keeps its code (INTERNAL):
            // the page may read fine once the disk does.
            result = absl::Status(result.code(),
                                  absl::StrCat("page ", read.hash.hex(), ": ", std::string(result.message())));
          } else if (stored_tokens != read.n_tokens) {
            result = absl::DataLossError(absl::StrCat("page ", read.hash.hex(), " holds ",
                                                      stored_tokens, " tokens, the record needs ",
                                                      read.n_tokens));
          }
        }
        values[i].Reset();
      }
    }
    page_files_.KeepDirectBuffer(std::move(buffer));
  };
  const int readers = direct ? std::max(threads, kDirectReaders) : threads;
  const int helpers =
      static_cast<int>(std::min<size_t>(static_cast<size_t>(std::max(readers, 1)), n_batches)) - 1;
  std::vector<std::thread> pool;
  for (int i = 0; i < helpers; ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  done = true;
  if (prefetcher.joinable()) prefetcher.join();
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].ok()) continue;
    if (failed_index != nullptr) *failed_index = i;
    return results[i];
  }
  return absl::OkStatus();
}

void SessionStore::PrepareDirectReads(const KvGeometry& geometry) const {
  // A few stored pages (one may be a format-1 page without a file, or
  // have lost its file): direct reads work if one of their files opens so.
  constexpr int kProbes = 8;
  std::vector<PageHash> probes;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [hash, ref] : table_.pages) {
      if (static_cast<int>(probes.size()) == kProbes) break;
      probes.push_back(hash);
    }
  }
  if (std::none_of(probes.begin(), probes.end(), [&](const PageHash& h) { return page_files_.ReadsDirect(h); })) {
    return;
  }
  // One buffer per direct reader, mapped now and kept by page_files_.
  const size_t file_bytes = EncodedPageBytes(geometry, geometry.page_tokens);
  std::vector<std::unique_ptr<PageFiles::DirectBuffer>> buffers;
  for (int i = 0; i < kDirectReaders; ++i) {
    buffers.push_back(page_files_.TakeDirectBuffer(file_bytes));
    if (buffers.back()->data() == nullptr) break;
  }
  for (std::unique_ptr<PageFiles::DirectBuffer>& buffer : buffers) page_files_.KeepDirectBuffer(std::move(buffer));
}

bool SessionStore::HasPage(const PageHash& hash) const {
  absl::ReaderMutexLock lock(&mu_);
  return table_.pages.contains(hash);
}

}  // namespace kvs
