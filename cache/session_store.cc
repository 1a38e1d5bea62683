// SessionStore's life (session_store.h): opening the database, recovery
// after a failed write, the format version, the free-space floor, LoadAll
// and the reference counts, Stats, meta, Verify. Its mutations are in
// session_store_write.cc, its reads in session_store_read.cc.
#include "cache/session_store.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/base/internal/raw_logging.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "rocksdb/listener.h"
#include "rocksdb/options.h"
#include "rocksdb/sst_file_manager.h"
#include "rocksdb/write_batch.h"

#include "cache/session_store_internal.h"

namespace kvs {

using session_store_internal::FromRocks;
using session_store_internal::ReadRecord;
using session_store_internal::SessionOf;

namespace {

// Calls fn(key, value) for every entry of `family` in key order.
absl::Status ForEachEntry(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* family,
                          const rocksdb::ReadOptions& options,
                          absl::FunctionRef<void(std::string_view, std::string_view)> fn) {
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(options, family));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    fn(it->key().ToStringView(), it->value().ToStringView());
  }
  return FromRocks(it->status(), absl::StrCat("scan of ", family->GetName()));
}

// Leaves recovery from a failed write to the store, which resumes RocksDB on
// its next mutation (Write), instead of RocksDB's background retries: while
// those run, DB::Resume() is refused as busy, so a write after the disk
// came back could fail for seconds.
class ManualErrorRecovery : public rocksdb::EventListener {
 public:
  const char* Name() const override { return "KvsManualErrorRecovery"; }
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason, rocksdb::Status bg_error,
                            bool* auto_recovery) override {
    bg_error.PermitUncheckedError();
    *auto_recovery = false;
  }
};

}  // namespace

absl::Status SessionStore::OpenDb(const std::string& dir, rocksdb::Env* env, bool read_only,
                                  std::unique_ptr<rocksdb::DB>* db,
                                  std::vector<rocksdb::ColumnFamilyHandle*>* handles) {
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.keep_log_file_num = 4;
  // The small record families would otherwise pin write-ahead logs full of
  // pages (up to RocksDB's default of gigabytes) and make restarts replay
  // them; this flushes them once the logs pass 256 MiB.
  db_options.max_total_wal_size = uint64_t{256} << 20;
  // The store recovers from failed writes itself (Recover).
  db_options.listeners.push_back(std::make_shared<ManualErrorRecovery>());
  db_options.max_bgerror_resume_count = 0;
  if (env != nullptr) db_options.env = env;
  // Compactions first check that the disk has room for them.
  db_options.sst_file_manager.reset(
      rocksdb::NewSstFileManager(env != nullptr ? env : rocksdb::Env::Default()));

  rocksdb::ColumnFamilyOptions record_options;  // RocksDB defaults (compressed)
  rocksdb::ColumnFamilyOptions page_options;
  // Small memtables: what a flush may still write is covered by the floor.
  record_options.write_buffer_size = kWriteBufferBytes / 4;
  page_options.write_buffer_size = kWriteBufferBytes;
  // KV values do not compress; pages go to blob files so compactions move
  // 16-byte keys and references, not megabytes of KV.
  page_options.compression = rocksdb::kNoCompression;
  page_options.enable_blob_files = true;
  page_options.min_blob_size = 4096;
  page_options.blob_compression_type = rocksdb::kNoCompression;
  page_options.enable_blob_garbage_collection = true;

  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {kMetaFamily, record_options},
      {kSessionsFamily, record_options},
      {kCheckpointsFamily, record_options},
      {kPagesFamily, page_options},
  };
  rocksdb::DB* raw = nullptr;
  handles->clear();
  rocksdb::Status s = read_only
                          ? rocksdb::DB::OpenForReadOnly(db_options, dir, families, handles, &raw)
                          : rocksdb::DB::Open(db_options, dir, families, handles, &raw);
  if (!s.ok()) return FromRocks(s, absl::StrCat("open session store ", dir));
  db->reset(raw);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SessionStore>> SessionStore::Open(const std::string& dir,
                                                                  const StoreOptions& options) {
  std::unique_ptr<rocksdb::Env> env;
  if (options.file_system != nullptr) env = rocksdb::NewCompositeEnv(options.file_system);
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  // An existing store on a disk under the floor opens read-only.
  struct statvfs st;
  const bool exists = std::filesystem::exists(std::filesystem::path(dir) / "CURRENT");
  const bool under_floor =
      statvfs(dir.c_str(), &st) == 0 &&
      static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize) <
          std::max(options.min_free_bytes, kMinFreeBytes);
  const bool read_only = exists && under_floor;
  if (absl::Status s = OpenDb(dir, env.get(), read_only, &db, &handles); !s.ok()) return s;
  std::unique_ptr<SessionStore> store(
      new SessionStore(dir, options, std::move(env), std::move(db), std::move(handles)));
  absl::MutexLock lock(&store->mu_);
  if (read_only) {
    bool needs_record = false;  // recorded when a mutation reopens it for writing
    if (absl::Status v = store->ReadFormatVersion(&needs_record); !v.ok()) return v;
    store->read_only_ = true;
    store->write_failed_ = true;  // the first mutation reopens for writing
    return store;
  }
  if (absl::Status s = store->PrepareForWrites(); !s.ok()) return s;
  return store;
}

SessionStore::SessionStore(const std::string& dir, const StoreOptions& options,
                           std::unique_ptr<rocksdb::Env> env, std::unique_ptr<rocksdb::DB> db,
                           std::vector<rocksdb::ColumnFamilyHandle*> handles)
    : dir_(dir),
      options_(options),
      env_(std::move(env)),
      page_files_(dir + "/pages",
                  options.file_system != nullptr ? options.file_system.get() : rocksdb::FileSystem::Default().get(),
                  options.page_writes) {
  SetDb(std::move(db), std::move(handles));
}

SessionStore::~SessionStore() { CloseDb(); }

void SessionStore::SetDb(std::unique_ptr<rocksdb::DB> db,
                         std::vector<rocksdb::ColumnFamilyHandle*> handles) {
  db_ = std::move(db);
  handles_ = std::move(handles);
  meta_ = handles_[0];
  sessions_cf_ = handles_[1];
  checkpoints_cf_ = handles_[2];
  pages_cf_ = handles_[3];
}

void SessionStore::CloseDb() {
  if (db_ == nullptr) return;
  for (rocksdb::ColumnFamilyHandle* h : handles_) db_->DestroyColumnFamilyHandle(h);
  handles_.clear();
  meta_ = sessions_cf_ = checkpoints_cf_ = pages_cf_ = nullptr;
  db_->Close().PermitUncheckedError();
  db_.reset();
}

absl::Status SessionStore::ProbeWritable() const {
  rocksdb::FileSystem* fs = options_.file_system != nullptr
                                ? options_.file_system.get()
                                : rocksdb::FileSystem::Default().get();
  const std::string path = absl::StrCat(dir_, "/WRITE_PROBE");
  const std::string block(4096, '\0');
  std::unique_ptr<rocksdb::FSWritableFile> file;
  rocksdb::IOStatus s = fs->NewWritableFile(path, rocksdb::FileOptions(), &file, nullptr);
  if (s.ok()) s = file->Append(block, rocksdb::IOOptions(), nullptr);
  if (s.ok()) s = file->Sync(rocksdb::IOOptions(), nullptr);
  if (file != nullptr) file->Close(rocksdb::IOOptions(), nullptr).PermitUncheckedError();
  fs->DeleteFile(path, rocksdb::IOOptions(), nullptr).PermitUncheckedError();
  return FromRocks(s, "session store: the disk still refuses writes");
}

int64_t SessionStore::FreeBytes() const {
  struct statvfs st;
  if (statvfs(dir_.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.f_bavail) * st.f_frsize;
}

int64_t SessionStore::floor_bytes() const { return std::max(options_.min_free_bytes, kMinFreeBytes); }

absl::Status SessionStore::Recover(bool frees_space) {
  // Not while the disk is under the floor (RocksDB writes at once), unless
  // the mutation frees space: then the probe below decides.
  if (const int64_t free_bytes = FreeBytes();
      !frees_space && free_bytes >= 0 && free_bytes < floor_bytes()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "disk full: ", FreeSpaceText(),
        "; writes are refused until space is freed (reads work; deleting sessions frees space)"));
  }
  // A probe first: no RocksDB recovery (which may escalate the error) while
  // the disk still refuses writes.
  if (absl::Status s = ProbeWritable(); !s.ok()) {
    if (absl::IsResourceExhausted(s)) {
      return absl::ResourceExhaustedError(absl::StrCat("disk full: ", FreeSpaceText(), ": ", s.message()));
    }
    return s;
  }
  if (db_ != nullptr && !read_only_) {
    rocksdb::Status resumed = db_->Resume();
    if (resumed.ok()) {
      write_failed_ = false;
      return absl::OkStatus();
    }
    resumed.PermitUncheckedError();
  }
  // RocksDB could not resume (a failed WAL write is a fatal error to it):
  // reopen. Readers wait meanwhile (db_mu_); the counts are read back from
  // disk, which is the truth after a write whose outcome is uncertain.
  absl::MutexLock db_lock(&db_mu_);
  CloseDb();
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  if (absl::Status s = OpenDb(dir_, env_.get(), /*read_only=*/false, &db, &handles); !s.ok()) return s;
  SetDb(std::move(db), std::move(handles));
  if (read_only_) {
    if (absl::Status s = PrepareForWrites(); !s.ok()) return s;
    read_only_ = false;
  }
  PageRefTable table;
  if (absl::Status s = ReadTable(&table, nullptr, nullptr, nullptr); !s.ok()) {
    // The counts in table_ are from before the failed write, which may
    // have reappeared: closed, so the next mutation reopens and reads them
    // again (DB::Resume would take the stale counts as they are).
    CloseDb();
    return s;
  }
  table_ = std::move(table);
  write_failed_ = false;
  return absl::OkStatus();
}

absl::Status SessionStore::ReadFormatVersion(bool* needs_record) const {
  *needs_record = false;
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), meta_, kFormatVersionKey, &value);
  if (s.IsNotFound()) {
    // A new store, unless it already holds data.
    for (rocksdb::ColumnFamilyHandle* family : {sessions_cf_, checkpoints_cf_, pages_cf_}) {
      std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), family));
      it->SeekToFirst();
      if (it->Valid()) {
        return absl::DataLossError(absl::StrCat("session store holds ", family->GetName(),
                                                " but no ", kFormatVersionKey));
      }
      if (absl::Status st = FromRocks(it->status(), "open"); !st.ok()) return st;
    }
    *needs_record = true;
    return absl::OkStatus();
  }
  if (!s.ok()) return FromRocks(s, "read format version");
  int version = 0;
  if (!absl::SimpleAtoi(value, &version)) {
    return absl::DataLossError(absl::StrCat("session store format version ", Quote(value),
                                            " is not a number"));
  }
  if (version < kOldestFormatVersion || version > kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat("session store format version ", version,
                                                      " (this build reads ", kOldestFormatVersion,
                                                      " to ", kFormatVersion, ")"));
  }
  // An older store's pages stay where they are (whole in the pages
  // family); new ones go to files, which an older build could not read.
  *needs_record = version < kFormatVersion;
  return absl::OkStatus();
}

absl::Status SessionStore::PrepareForWrites() {
  bool needs_record = false;
  if (absl::Status v = ReadFormatVersion(&needs_record); !v.ok()) return v;
  if (needs_record) {
    rocksdb::WriteOptions write_options;
    write_options.sync = options_.sync_writes;
    if (absl::Status s = FromRocks(db_->Put(write_options, meta_, kFormatVersionKey, absl::StrCat(kFormatVersion)),
                                   "record the format version");
        !s.ok()) {
      write_failed_ = true;
      return s;
    }
  }
  return page_files_.CreateDir();
}

absl::Status SessionStore::RequireLoaded() const {
  if (!loaded_) return absl::FailedPreconditionError("SessionStore: LoadAll has not been called");
  return absl::OkStatus();
}

absl::Status SessionStore::RecoverIfWriteFailed(bool frees_space) {
  return write_failed_ ? Recover(frees_space) : absl::OkStatus();
}

std::string SessionStore::FreeSpaceText() const {
  struct statvfs st;
  if (statvfs(dir_.c_str(), &st) != 0) return absl::StrCat("the session store in ", dir_);
  const int64_t free_bytes = static_cast<int64_t>(st.f_bavail) * st.f_frsize;
  const int64_t total_bytes = static_cast<int64_t>(st.f_blocks) * st.f_frsize;
  return absl::StrCat("the session store in ", dir_, " has ", free_bytes >> 20, " MiB free of ",
                      total_bytes >> 20, " MiB (floor ", floor_bytes() >> 20, " MiB)");
}

absl::Status SessionStore::CheckFreeSpace(const rocksdb::WriteBatch& batch) const {
  if (!batch.HasPut()) return absl::OkStatus();
  const int64_t free_bytes = FreeBytes();
  if (free_bytes < 0 || free_bytes >= floor_bytes()) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "disk full: ", FreeSpaceText(),
      "; writes are refused until space is freed (reads work; deleting sessions frees space)"));
}

absl::Status SessionStore::CheckFloor() const {
  if (const int64_t free_bytes = FreeBytes(); free_bytes >= 0 && free_bytes < floor_bytes()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "disk full: ", FreeSpaceText(),
        "; writes are refused until space is freed (reads work; deleting sessions frees space)"));
  }
  return absl::OkStatus();
}

void SessionStore::CollectPageFiles() {
  absl::StatusOr<PageFiles::Listing> listing = page_files_.ListOnDisk();
  if (!listing.ok()) {
    ABSL_RAW_LOG(WARNING, "session store: %s", listing.status().ToString().c_str());
    return;
  }
  int64_t removed = 0;
  for (const PageHash& hash : listing->pages) {
    if (table_.pages.contains(hash)) continue;
    // Only files without a page entry: a page whose entry is there but
    // which no readable record references may belong to a damaged record,
    // whose hashes are unknown; it stays, as its entry does.
    rocksdb::PinnableSlice value;
    rocksdb::Status entry = db_->Get(rocksdb::ReadOptions(), pages_cf_, rocksdb::Slice(hash.view()), &value);
    if (!entry.IsNotFound()) continue;
    if (page_files_.Remove(hash).ok()) ++removed;
  }
  for (const std::string& name : listing->others) {
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".tmp") != 0) continue;
    if (page_files_.RemoveOther(name).ok()) ++removed;
  }
  if (removed > 0) {
    ABSL_RAW_LOG(INFO, "session store: deleted %lld page files without an entry (left by a crash)",
                 static_cast<long long>(removed));
  }
}

absl::Status SessionStore::LoadAll(std::vector<SessionRecord>* sessions,
                                   std::vector<CheckpointRecord>* checkpoints,
                                   std::vector<CorruptEntry>* corrupt) {
  absl::MutexLock lock(&mu_);
  if (db_ == nullptr) return Reopening();
  PageRefTable table;
  if (absl::Status s = ReadTable(&table, sessions, checkpoints, corrupt); !s.ok()) return s;
  table_ = std::move(table);
  loaded_ = true;
  if (!read_only_) CollectPageFiles();
  return absl::OkStatus();
}

absl::Status SessionStore::ReadTable(PageRefTable* table, std::vector<SessionRecord>* sessions,
                                     std::vector<CheckpointRecord>* checkpoints,
                                     std::vector<CorruptEntry>* corrupt) {
  std::vector<SessionRecord> session_records;
  std::vector<CheckpointRecord> checkpoint_records;

  // Reads one family into `out` and `index`, counting page references.
  auto load = [&](rocksdb::ColumnFamilyHandle* family, CorruptEntry::Kind kind, auto* out,
                  RecordIndex* index) {
    using Record = typename std::remove_pointer_t<decltype(out)>::value_type;
    rocksdb::ReadOptions read_options;
    read_options.fill_cache = false;
    return ForEachEntry(db_.get(), family, read_options, [&](std::string_view key,
                                                             std::string_view value) {
      Record record;
      auto verified = std::make_shared<VerifiedPages>();
      absl::Status s = ReadRecord(key, value, &record, verified.get());
      for (size_t i = 0; i < verified->hashes.size(); ++i) {
        PageRef& ref = table->pages[verified->hashes[i]];
        ++ref.refs;
        if (s.ok()) {
          const SessionRecord& session = SessionOf(record);
          const KvGeometry g = *FromGeometryRecord(session.geometry());
          ref.bytes = static_cast<int64_t>(
              EncodedPageBytes(g, PageTokensAt(g, session.kv_length(), static_cast<int>(i))));
        }
      }
      RecordRefs refs{.verified = std::move(verified)};
      if (s.ok()) {
        out->push_back(std::move(record));
      } else {
        refs.corrupt = true;
        ABSL_RAW_LOG(WARNING, "session store: %s '%s' is unreadable: %s",
                     family->GetName().c_str(), std::string(key).c_str(), s.ToString().c_str());
        if (corrupt != nullptr) corrupt->push_back({kind, std::string(key), s});
      }
      index->emplace(std::string(key), std::move(refs));
    });
  };
  if (corrupt != nullptr) corrupt->clear();
  if (absl::Status s = load(sessions_cf_, CorruptEntry::Kind::kSession, &session_records,
                            &table->sessions);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = load(checkpoints_cf_, CorruptEntry::Kind::kCheckpoint,
                            &checkpoint_records, &table->checkpoints);
      !s.ok()) {
    return s;
  }
  for (const auto& [hash, ref] : table->pages) {
    table->page_bytes += ref.bytes;
    table->page_references += ref.refs;
  }
  if (sessions != nullptr) *sessions = std::move(session_records);
  if (checkpoints != nullptr) *checkpoints = std::move(checkpoint_records);
  return absl::OkStatus();
}

absl::Status SessionStore::Reopening() {
  return absl::UnavailableError(
      "session store: reopening after a failed write (the next mutation retries)");
}

StoreStats SessionStore::Stats() const {
  absl::ReaderMutexLock lock(&mu_);
  StoreStats stats{.pages = static_cast<int64_t>(table_.pages.size()),
                   .page_bytes = table_.page_bytes,
                   .page_references = table_.page_references};
  for (const auto& [id, refs] : table_.sessions) {
    (refs.corrupt ? stats.corrupt_records : stats.sessions)++;
  }
  for (const auto& [id, refs] : table_.checkpoints) {
    (refs.corrupt ? stats.corrupt_records : stats.checkpoints)++;
  }
  return stats;
}

absl::Status SessionStore::PutMeta(const std::string& key, const std::string& value) {
  if (key == kFormatVersionKey) {
    return absl::InvalidArgumentError(absl::StrCat("meta key '", key, "' is reserved"));
  }
  absl::MutexLock lock(&mu_);
  if (absl::Status s = RecoverIfWriteFailed(); !s.ok()) return s;
  rocksdb::WriteBatch batch;
  batch.Put(meta_, key, value);
  return Write(&batch);
}

absl::StatusOr<std::string> SessionStore::GetMeta(const std::string& key) const {
  absl::ReaderMutexLock db_lock(&db_mu_);
  if (db_ == nullptr) return Reopening();
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), meta_, key, &value);
  if (!s.ok()) return FromRocks(s, absl::StrCat("meta '", key, "'"));
  return value;
}

absl::StatusOr<VerifyReport> SessionStore::Verify() const {
  // The counts and a RocksDB snapshot taken under the lock describe the same
  // state: writers change both only while holding it.
  // db_mu_ (taken after mu_, the lock order) keeps the database open until
  // the scan ends.
  absl::flat_hash_map<PageHash, PageRef> referenced;
  const rocksdb::Snapshot* snapshot = nullptr;
  mu_.ReaderLock();
  if (absl::Status s = RequireLoaded(); !s.ok()) {
    mu_.ReaderUnlock();
    return s;
  }
  absl::ReaderMutexLock db_lock(&db_mu_);
  if (db_ == nullptr) {
    mu_.ReaderUnlock();
    return Reopening();
  }
  referenced = table_.pages;
  snapshot = db_->GetSnapshot();
  mu_.ReaderUnlock();
  rocksdb::ReadOptions read_options;
  read_options.snapshot = snapshot;
  read_options.fill_cache = false;
  VerifyReport report;
  absl::Status s = ForEachEntry(
      db_.get(), pages_cf_, read_options, [&](std::string_view key, std::string_view value) {
        ++report.pages_checked;
        std::optional<PageHash> hash = PageHash::FromBytes(key);
        if (!hash.has_value()) {
          report.corrupt_pages.push_back(
              {CorruptEntry::Kind::kPage, std::string(key),
               absl::DataLossError(absl::StrCat("page key of ", key.size(), " bytes"))});
          return;
        }
        auto it = referenced.find(*hash);
        absl::StatusOr<std::string> encoded = ResolvePage(*hash, value);
        absl::Status page = encoded.ok() ? CheckEncodedPage(*encoded).status() : encoded.status();
        if (page.ok() && it != referenced.end() && it->second.bytes != 0 &&
            it->second.bytes != static_cast<int64_t>(encoded->size())) {
          page = absl::DataLossError(absl::StrCat("page is ", encoded->size(),
                                                  " bytes, its records need ", it->second.bytes));
        }
        if (!page.ok()) report.corrupt_pages.push_back({CorruptEntry::Kind::kPage, std::string(key), page});
        if (it == referenced.end()) {
          report.orphan_pages.push_back(*hash);
        } else {
          referenced.erase(it);
        }
      });
  db_->ReleaseSnapshot(snapshot);
  if (!s.ok()) return s;
  for (const auto& [hash, ref] : referenced) report.missing_pages.push_back(hash);
  return report;
}

}  // namespace kvs
