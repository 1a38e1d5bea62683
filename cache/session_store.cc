#include "cache/session_store.h"

#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/base/internal/raw_logging.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cache/page_codec.h"
#include "cache/record_codec.h"
#include "rocksdb/db.h"
#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "rocksdb/listener.h"
#include "rocksdb/options.h"
#include "rocksdb/sst_file_manager.h"
#include "rocksdb/write_batch.h"

namespace kvs {
namespace {

absl::Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  std::string message = absl::StrCat(std::string(what), ": ", s.ToString());
  if (s.IsNotFound()) return absl::NotFoundError(message);
  if (s.IsCorruption()) return absl::DataLossError(message);
  if (s.IsNoSpace()) return absl::ResourceExhaustedError(message);
  if (s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) return absl::UnavailableError(message);
  if (s.IsInvalidArgument() || s.IsNotSupported()) return absl::FailedPreconditionError(message);
  return absl::InternalError(message);
}

const SessionRecord& SessionOf(const SessionRecord& r) { return r; }
const SessionRecord& SessionOf(const CheckpointRecord& r) { return r.session(); }

// Decodes and checks one stored record and gives the pages it references.
// A record that parses but breaks an invariant still gives every 16-byte
// hash it lists, so a damaged record never lets its pages be collected.
// `pages` gets the verified pages, or for a damaged record just its hashes.
template <typename Record>
absl::Status ReadRecord(std::string_view key, std::string_view value, Record* record,
                        VerifiedPages* pages) {
  *pages = VerifiedPages();
  if (absl::Status s = DecodeRecordValue(value, record); !s.ok()) return s;
  absl::Status problem;
  if (record->id() != key) {
    problem = absl::DataLossError(
        absl::StrCat("record of id '", record->id(), "' stored under '", std::string(key), "'"));
  } else {
    absl::StatusOr<VerifiedPages> verified =
        VerifySessionRecord(SessionOf(*record), nullptr, nullptr);
    if (verified.ok()) {
      *pages = *std::move(verified);
      return absl::OkStatus();
    }
    problem = absl::DataLossError(absl::StrCat("record '", record->id(), "': ",
                                               std::string(verified.status().message())));
  }
  for (const std::string& h : SessionOf(*record).page_hashes()) {
    if (std::optional<PageHash> hash = PageHash::FromBytes(h)) pages->hashes.push_back(*hash);
  }
  return problem;
}

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

// Bytes a write batch of `v`'s page entries (a header each; the pages
// themselves go to files) and a record value of `value_bytes` can reach:
// reserved up front, the batch is built in one allocation.
size_t BatchBytesAtMost(const VerifiedPages& v, size_t value_bytes) {
  constexpr size_t kPerEntry = 64;  // tag, column family, varint lengths, key
  return v.hashes.size() * (kPageHeaderBytes + kPerEntry) + value_bytes + kPerEntry;
}

// A format-2 page entry: the page's header alone (a page always has a
// payload, so a format-1 entry, the whole page, is longer).
bool IsPageFileEntry(std::string_view value) { return value.size() == kPageHeaderBytes; }

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
      static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize) < std::max(options.min_free_bytes, kMinFreeBytes);
  const bool read_only = exists && under_floor;
  if (absl::Status s = OpenDb(dir, env.get(), read_only, &db, &handles); !s.ok()) return s;
  std::unique_ptr<SessionStore> store(
      new SessionStore(dir, options, std::move(env), std::move(db), std::move(handles)));
  if (read_only) {
    absl::MutexLock lock(&store->mu_);
    store->read_only_ = true;
    store->write_failed_ = true;  // the first mutation reopens for writing
    return store;
  }
  if (absl::Status v = store->CheckFormatVersion(); !v.ok()) return v;
  if (absl::Status d = store->page_files_.CreateDir(); !d.ok()) return d;
  return store;
}

SessionStore::SessionStore(const std::string& dir, const StoreOptions& options,
                           std::unique_ptr<rocksdb::Env> env, std::unique_ptr<rocksdb::DB> db,
                           std::vector<rocksdb::ColumnFamilyHandle*> handles)
    : dir_(dir),
      options_(options),
      env_(std::move(env)),
      page_files_(dir + "/pages", options.file_system != nullptr
                                      ? options.file_system.get()
                                      : rocksdb::FileSystem::Default().get()) {
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
  read_only_ = false;
  SetDb(std::move(db), std::move(handles));
  PageRefTable table;
  if (absl::Status s = ReadTable(&table, nullptr, nullptr, nullptr); !s.ok()) return s;
  table_ = std::move(table);
  write_failed_ = false;
  return absl::OkStatus();
}

absl::Status SessionStore::CheckFormatVersion() {
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
    rocksdb::WriteBatch batch;
    batch.Put(meta_, kFormatVersionKey, absl::StrCat(kFormatVersion));
    absl::MutexLock lock(&mu_);
    return Write(&batch);
  }
  if (!s.ok()) return FromRocks(s, "read format version");
  int version = 0;
  if (!absl::SimpleAtoi(value, &version)) {
    return absl::DataLossError(absl::StrCat("session store format version '", value,
                                            "' is not a number"));
  }
  if (version < kOldestFormatVersion || version > kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat("session store format version ", version,
                                                      " (this build reads ", kOldestFormatVersion,
                                                      " to ", kFormatVersion, ")"));
  }
  if (version < kFormatVersion) {
    // Its pages stay where they are (whole in the pages family); new ones
    // go to files, which a format-1 build could not read.
    rocksdb::WriteBatch batch;
    batch.Put(meta_, kFormatVersionKey, absl::StrCat(kFormatVersion));
    absl::MutexLock lock(&mu_);
    return Write(&batch);
  }
  return absl::OkStatus();
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

absl::Status SessionStore::Write(rocksdb::WriteBatch* batch) {
  if (absl::Status floor = CheckFreeSpace(*batch); !floor.ok()) return floor;
  rocksdb::WriteOptions write_options;
  write_options.sync = options_.sync_writes;
  absl::Status s = FromRocks(db_->Write(write_options, batch), "session store write");
  if (!s.ok()) write_failed_ = true;
  if (absl::IsResourceExhausted(s)) {
    return absl::ResourceExhaustedError(absl::StrCat("disk full: ", FreeSpaceText(), ": ", s.message()));
  }
  return s;
}

absl::Status SessionStore::Commit(RefCountChange& change, rocksdb::WriteBatch* batch,
                                  WriteStats* stats) {
  const std::vector<PageHash> freed = change.PagesToDelete();
  for (const PageHash& hash : freed) {
    if (rocksdb::Status del = batch->Delete(pages_cf_, rocksdb::Slice(hash.view())); !del.ok()) {
      return FromRocks(del, absl::StrCat("batch delete of page ", hash.hex()));
    }
  }
  if (absl::Status s = Write(batch); !s.ok()) return s;
  change.Apply(&table_);
  if (stats != nullptr) stats->pages_deleted += static_cast<int64_t>(freed.size());
  // After the batch: a crash before these deletes leaves files no record
  // references, which LoadAll collects.
  for (const PageHash& hash : freed) {
    if (absl::Status removed = page_files_.Remove(hash); !removed.ok()) {
      ABSL_RAW_LOG(WARNING, "session store: %s (collected at the next start)",
                   removed.ToString().c_str());
    }
  }
  return absl::OkStatus();
}

absl::Status SessionStore::CheckFloor() const {
  if (const int64_t free_bytes = FreeBytes(); free_bytes >= 0 && free_bytes < floor_bytes()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "disk full: ", FreeSpaceText(),
        "; writes are refused until space is freed (reads work; deleting sessions frees space)"));
  }
  return absl::OkStatus();
}

absl::Status SessionStore::AddPage(const PageHash& hash, const PageEncoding& encoded,
                                   rocksdb::WriteBatch* batch, MutationFiles* files) {
  const std::string_view header = encoded.header();
  if (page_files_.Holds(hash, header, encoded.size())) {
    // Staged (StagePage): whole, and of this very encoding.
    ++files->staged_used;
  } else {
    // The floor, before the first byte of the mutation reaches the disk.
    if (files->written.empty()) {
      if (absl::Status floor = CheckFloor(); !floor.ok()) return floor;
    }
    if (absl::Status s = page_files_.Write(hash, header, encoded.payload(), options_.sync_writes);
        !s.ok()) {
      if (absl::IsResourceExhausted(s)) {
        return absl::ResourceExhaustedError(absl::StrCat("disk full: ", FreeSpaceText(), ": ", s.message()));
      }
      return s;
    }
    files->written.push_back(hash);
  }
  return FromRocks(batch->Put(pages_cf_, rocksdb::Slice(hash.view()),
                              rocksdb::Slice(header.data(), header.size())),
                   absl::StrCat("batch page ", hash.hex()));
}

absl::Status SessionStore::SettlePageFiles(absl::Status built, const MutationFiles& files) {
  const bool touched = !files.written.empty() || files.staged_used > 0;
  if (built.ok() && touched && options_.sync_writes) built = page_files_.SyncDir();
  if (!built.ok()) {
    // No record references them: nothing was committed.
    for (const PageHash& hash : files.written) page_files_.Remove(hash).IgnoreError();
  }
  return built;
}

absl::StatusOr<bool> SessionStore::StagePage(
    const PageHash& hash, size_t encoded_bytes,
    absl::FunctionRef<absl::StatusOr<PageEncoding>()> encode) {
  {
    absl::ReaderMutexLock lock(&mu_);
    if (table_.pages.contains(hash)) return false;
  }
  if (absl::Status floor = CheckFloor(); !floor.ok()) return floor;
  absl::StatusOr<PageEncoding> encoded = encode();
  if (!encoded.ok()) return encoded.status();
  if (encoded->size() != encoded_bytes || encoded->header().size() != kPageHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("staged page ", hash.hex(), " is ",
                                                   encoded->size(), " bytes, not ", encoded_bytes));
  }
  if (page_files_.Holds(hash, encoded->header(), encoded->size())) return false;
  if (absl::Status s = page_files_.Write(hash, encoded->header(), encoded->payload(), options_.sync_writes);
      !s.ok()) {
    if (absl::IsResourceExhausted(s)) {
      return absl::ResourceExhaustedError(absl::StrCat("disk full: ", FreeSpaceText(), ": ", s.message()));
    }
    return s;
  }
  return true;
}

void SessionStore::DiscardStaged(std::span<const PageHash> hashes) {
  // Under the lock: a mutation checks a staged file and commits its entry
  // in one critical section, so a file is either deleted before a
  // mutation looks for it (which then writes its own) or held after.
  absl::MutexLock lock(&mu_);
  for (const PageHash& hash : hashes) {
    if (!table_.pages.contains(hash)) page_files_.Remove(hash).IgnoreError();
  }
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

std::shared_ptr<const VerifiedPages> SessionStore::ReferenceFor(const std::string& id,
                                                                const std::string& parent) const {
  for (const std::string* key : {&id, &parent}) {
    if (key->empty()) continue;
    auto it = table_.sessions.find(*key);
    if (it != table_.sessions.end() && !it->second.corrupt) return it->second.verified;
  }
  return nullptr;
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

absl::Status SessionStore::PutSession(
    const SessionRecord& record,
    absl::FunctionRef<absl::StatusOr<PageEncoding>(int page_index)> encode_missing,
    WriteStats* stats) {
  return PutSessions(
      std::span<const SessionRecord>(&record, 1),
      [&](int, int page_index) { return encode_missing(page_index); }, stats);
}

absl::Status SessionStore::PutSessions(
    std::span<const SessionRecord> records,
    absl::FunctionRef<absl::StatusOr<PageEncoding>(int record_index, int page_index)>
        encode_missing,
    WriteStats* stats) {
  absl::flat_hash_set<std::string_view> ids;
  for (const SessionRecord& record : records) {
    if (record.id().empty()) return absl::InvalidArgumentError("session record without an id");
    if (!ids.insert(record.id()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("session '", record.id(), "' appears twice in one write"));
    }
  }
  // What each record is verified against, then everything that needs no
  // lock: checks, hashes of the pages the references do not vouch for,
  // serialisation. A reference replaced meanwhile is still a verified
  // record, which is all the check needs.
  std::vector<std::shared_ptr<const VerifiedPages>> references;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const SessionRecord& record : records) {
      references.push_back(ReferenceFor(record.id(), record.parent_session_id()));
    }
  }
  WriteStats written;
  std::vector<std::shared_ptr<const VerifiedPages>> verified;
  std::vector<std::string> values;
  for (size_t r = 0; r < records.size(); ++r) {
    absl::StatusOr<VerifiedPages> v =
        VerifySessionRecord(records[r], references[r].get(), &written.pages_hashed);
    if (!v.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("session '", records[r].id(), "': ", std::string(v.status().message())));
    }
    verified.push_back(std::make_shared<const VerifiedPages>(*std::move(v)));
    values.push_back(EncodeRecordValue(records[r]));
  }

  size_t batch_bytes = 0;
  for (size_t r = 0; r < records.size(); ++r) batch_bytes += BatchBytesAtMost(*verified[r], values[r].size());
  absl::MutexLock lock(&mu_);
  if (absl::Status s = RequireLoaded(); !s.ok()) return s;
  if (absl::Status s = RecoverIfWriteFailed(); !s.ok()) return s;
  rocksdb::WriteBatch batch(batch_bytes);
  RefCountChange change(&table_);
  MutationFiles new_files;
  absl::Status built = [&]() -> absl::Status {
    for (size_t r = 0; r < records.size(); ++r) {
      const KvGeometry& g = verified[r]->geometry;
      const std::vector<PageHash>& hashes = verified[r]->hashes;
      for (size_t i = 0; i < hashes.size(); ++i) {
        const PageHash& hash = hashes[i];
        if (change.Held(hash)) {
          ++written.pages_reused;
          continue;
        }
        const int page_index = static_cast<int>(i);
        absl::StatusOr<PageEncoding> page = encode_missing(static_cast<int>(r), page_index);
        if (!page.ok()) return page.status();
        const int n_tokens = PageTokensAt(g, records[r].kv_length(), page_index);
        absl::StatusOr<EncodedPageInfo> info = ReadPageHeaderOfParts(*page);
        if (!info.ok() || !(info->geometry == g) || info->n_tokens != n_tokens) {
          return absl::InvalidArgumentError(absl::StrCat(
              "session '", records[r].id(), "': encode_missing(", page_index,
              ") is not a page of ", DescribeGeometry(g), " with ", n_tokens, " tokens",
              info.ok() ? "" : absl::StrCat(": ", std::string(info.status().message()))));
        }
        if (absl::Status added = AddPage(hash, *page, &batch, &new_files); !added.ok()) return added;
        change.AddPage(hash, static_cast<int64_t>(page->size()));
        ++written.pages_written;
        written.bytes_written += static_cast<int64_t>(page->size());
      }
      batch.Put(sessions_cf_, records[r].id(), values[r]);
      written.bytes_written += static_cast<int64_t>(values[r].size());
      change.SetRecord(&table_.sessions, records[r].id(), RecordRefs{.verified = verified[r]});
    }
    return absl::OkStatus();
  }();
  if (absl::Status s = SettlePageFiles(std::move(built), new_files); !s.ok()) return s;
  if (absl::Status s = Commit(change, &batch, &written); !s.ok()) return s;
  if (stats != nullptr) *stats = written;
  return absl::OkStatus();
}

absl::Status SessionStore::DeleteRecord(rocksdb::ColumnFamilyHandle* SessionStore::*family,
                                        RecordIndex* index, const std::string& kind,
                                        const std::string& id, WriteStats* stats) {
  if (absl::Status s = RequireLoaded(); !s.ok()) return s;
  if (!index->contains(id)) return absl::NotFoundError(absl::StrCat(kind, " '", id, "' not found"));
  if (absl::Status s = RecoverIfWriteFailed(/*frees_space=*/true); !s.ok()) return s;
  rocksdb::WriteBatch batch;
  // The handle is read after recovery, which may have reopened the database.
  batch.Delete(this->*family, id);
  RefCountChange change(&table_);
  change.SetRecord(index, id, std::nullopt);
  WriteStats written;
  if (absl::Status s = Commit(change, &batch, &written); !s.ok()) return s;
  if (stats != nullptr) *stats = written;
  return absl::OkStatus();
}

absl::Status SessionStore::DeleteSession(const std::string& id, WriteStats* stats) {
  absl::MutexLock lock(&mu_);
  return DeleteRecord(&SessionStore::sessions_cf_, &table_.sessions, "session", id, stats);
}

absl::Status SessionStore::DeleteCheckpoint(const std::string& id, WriteStats* stats) {
  absl::MutexLock lock(&mu_);
  return DeleteRecord(&SessionStore::checkpoints_cf_, &table_.checkpoints, "checkpoint", id, stats);
}

absl::Status SessionStore::PutCheckpoint(const CheckpointRecord& record, WriteStats* stats) {
  return PutCheckpoint(
      record,
      [&](int page_index) -> absl::StatusOr<std::string> {
        return absl::FailedPreconditionError(absl::StrCat(
            "checkpoint '", record.id(), "' references page ",
            PageHash::FromBytes(record.session().page_hashes(page_index))->hex(),
            " the store does not hold"));
      },
      stats);
}

absl::Status SessionStore::PutCheckpoint(
    const CheckpointRecord& record,
    absl::FunctionRef<absl::StatusOr<PageEncoding>(int page_index)> encode_missing,
    WriteStats* stats) {
  if (record.id().empty()) return absl::InvalidArgumentError("checkpoint record without an id");
  std::shared_ptr<const VerifiedPages> reference;
  {
    absl::ReaderMutexLock lock(&mu_);
    reference = ReferenceFor(record.session().id(), "");
  }
  WriteStats written;
  absl::StatusOr<VerifiedPages> verified =
      VerifySessionRecord(record.session(), reference.get(), &written.pages_hashed);
  if (!verified.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint '", record.id(), "': ",
                                                   std::string(verified.status().message())));
  }
  const std::string value = EncodeRecordValue(record);

  absl::MutexLock lock(&mu_);
  if (absl::Status s = RequireLoaded(); !s.ok()) return s;
  if (absl::Status s = RecoverIfWriteFailed(); !s.ok()) return s;
  rocksdb::WriteBatch batch(BatchBytesAtMost(*verified, value.size()));
  RefCountChange change(&table_);
  const KvGeometry& g = verified->geometry;
  MutationFiles new_files;
  absl::Status built = [&]() -> absl::Status {
    for (size_t i = 0; i < verified->hashes.size(); ++i) {
      const PageHash& hash = verified->hashes[i];
      if (change.Held(hash)) {
        ++written.pages_reused;
        continue;
      }
      const int page_index = static_cast<int>(i);
      absl::StatusOr<PageEncoding> page = encode_missing(page_index);
      if (!page.ok()) return page.status();
      const int n_tokens = PageTokensAt(g, record.session().kv_length(), page_index);
      absl::StatusOr<EncodedPageInfo> info = ReadPageHeaderOfParts(*page);
      if (!info.ok() || !(info->geometry == g) || info->n_tokens != n_tokens) {
        return absl::InvalidArgumentError(absl::StrCat(
            "checkpoint '", record.id(), "': encode_missing(", page_index, ") is not a page of ",
            DescribeGeometry(g), " with ", n_tokens, " tokens"));
      }
      if (absl::Status added = AddPage(hash, *page, &batch, &new_files); !added.ok()) return added;
      change.AddPage(hash, static_cast<int64_t>(page->size()));
      ++written.pages_written;
      written.bytes_written += static_cast<int64_t>(page->size());
    }
    return absl::OkStatus();
  }();
  if (absl::Status s = SettlePageFiles(std::move(built), new_files); !s.ok()) return s;
  batch.Put(checkpoints_cf_, record.id(), value);
  written.bytes_written += static_cast<int64_t>(value.size());
  change.SetRecord(&table_.checkpoints, record.id(),
                   RecordRefs{.verified = std::make_shared<const VerifiedPages>(*std::move(verified))});
  if (absl::Status s = Commit(change, &batch, &written); !s.ok()) return s;
  if (stats != nullptr) *stats = written;
  return absl::OkStatus();
}

namespace {

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

absl::Status SessionStore::Reopening() {
  return absl::UnavailableError(
      "session store: reopening after a failed write (the next mutation retries)");
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

absl::Status SessionStore::ReadStoredPageInto(const PageRead& read, const KvGeometry& geometry,
                                              std::string_view value, int* stored_tokens) const {
  if (!IsPageFileEntry(value)) return DecodePageInto(geometry, value, read.page, stored_tokens);
  if (read.n_tokens != geometry.page_tokens) {
    // A partial page (a sequence's last): its payload is packed, not in
    // the pool page's layout.
    absl::StatusOr<std::string> encoded = ResolvePage(read.hash, value);
    if (!encoded.ok()) return encoded.status();
    return DecodePageInto(geometry, *encoded, read.page, stored_tokens);
  }
  // A full page: its payload is the pool page, read straight into it.
  char header[kPageHeaderBytes];
  const size_t payload_bytes = PagePayloadBytes(geometry, geometry.page_tokens);
  if (absl::Status s = page_files_.ReadInto(read.hash, header, sizeof(header),
                                            reinterpret_cast<char*>(read.page), payload_bytes);
      !s.ok()) {
    return s;
  }
  if (std::string_view(header, sizeof(header)) != value) {
    return absl::DataLossError("its file's header differs from the stored one");
  }
  absl::StatusOr<EncodedPageInfo> info = CheckSplitPage(
      geometry, std::string_view(header, sizeof(header)), read.page, payload_bytes);
  if (!info.ok()) return info.status();
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
  // another page of the same size (docs/performance.md).
  options.verify_checksums = true;
  options.fill_cache = false;
  std::vector<absl::Status> results(reads.size());
  const size_t n_batches = (reads.size() + kBatch - 1) / kBatch;
  // Every page file is hinted to the kernel first, from a thread of its
  // own (a hint may wait for a slot in the disk's queue): read cold, the
  // disk then has every page's read in flight instead of one per reader.
  std::atomic<bool> done{false};
  std::thread prefetcher;
  if (reads.size() > 1) {
    prefetcher = std::thread([&] {
      for (const PageRead& read : reads) {
        if (done.load(std::memory_order_relaxed)) break;
        page_files_.Prefetch(read.hash, EncodedPageBytes(geometry, read.n_tokens));
      }
    });
  }
  std::atomic<size_t> next_batch{0};
  auto worker = [&] {
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
          result = ReadStoredPageInto(read, geometry, values[i].ToStringView(), &stored_tokens);
          if (absl::IsNotFound(result)) {
            result = absl::DataLossError(absl::StrCat("page ", read.hash.hex(), " missing: no page file"));
          } else if (!result.ok()) {
            result = absl::DataLossError(
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
  };
  const int helpers =
      static_cast<int>(std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), n_batches)) - 1;
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

bool SessionStore::HasPage(const PageHash& hash) const {
  absl::ReaderMutexLock lock(&mu_);
  return table_.pages.contains(hash);
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
