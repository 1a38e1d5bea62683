#include "cache/session_store.h"

#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/base/internal/raw_logging.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cache/crc32c.h"
#include "cache/page_codec.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/write_batch.h"

namespace kvs {
namespace {

// Record values are a little-endian CRC-32C of the serialized message,
// then the message.
constexpr size_t kRecordCrcBytes = 4;

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

std::string EncodeRecordValue(const google::protobuf::MessageLite& record) {
  std::string value(kRecordCrcBytes, '\0');
  record.AppendToString(&value);
  const uint32_t crc = Crc32c(value.data() + kRecordCrcBytes, value.size() - kRecordCrcBytes);
  for (size_t i = 0; i < kRecordCrcBytes; ++i) value[i] = static_cast<char>(crc >> (8 * i));
  return value;
}

absl::Status DecodeRecordValue(std::string_view value, google::protobuf::MessageLite* record) {
  if (value.size() < kRecordCrcBytes) {
    return absl::DataLossError(absl::StrCat("record value is ", value.size(),
                                            " bytes, shorter than its checksum"));
  }
  uint32_t stored = 0;
  for (size_t i = 0; i < kRecordCrcBytes; ++i) {
    stored |= uint32_t{static_cast<uint8_t>(value[i])} << (8 * i);
  }
  const std::string_view payload = value.substr(kRecordCrcBytes);
  if (Crc32c(payload.data(), payload.size()) != stored) {
    return absl::DataLossError("record checksum mismatch");
  }
  if (!record->ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::DataLossError("record does not parse");
  }
  return absl::OkStatus();
}

const SessionRecord& SessionOf(const SessionRecord& r) { return r; }
const SessionRecord& SessionOf(const CheckpointRecord& r) { return r.session(); }

// Decodes and checks one stored record and gives the pages it references.
// A record that parses but breaks an invariant still gives every 16-byte
// hash it lists, so a damaged record never lets its pages be collected.
template <typename Record>
absl::Status ReadRecord(std::string_view key, std::string_view value, Record* record,
                        std::vector<PageHash>* pages) {
  pages->clear();
  if (absl::Status s = DecodeRecordValue(value, record); !s.ok()) return s;
  absl::Status problem;
  if (record->id() != key) {
    problem = absl::DataLossError(
        absl::StrCat("record of id '", record->id(), "' stored under '", std::string(key), "'"));
  } else {
    absl::StatusOr<std::vector<PageHash>> hashes = CheckSessionRecord(SessionOf(*record));
    if (hashes.ok()) {
      *pages = *std::move(hashes);
      return absl::OkStatus();
    }
    problem = absl::DataLossError(absl::StrCat("record '", record->id(), "': ",
                                               std::string(hashes.status().message())));
  }
  for (const std::string& h : SessionOf(*record).page_hashes()) {
    if (std::optional<PageHash> hash = PageHash::FromBytes(h)) pages->push_back(*hash);
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

}  // namespace

// Record helpers.

KvGeometryRecord ToGeometryRecord(const KvGeometry& g) {
  KvGeometryRecord r;
  r.set_n_layers(g.n_layers);
  r.set_n_kv_heads(g.n_kv_heads);
  r.set_head_dim(g.head_dim);
  r.set_page_tokens(g.page_tokens);
  r.set_dtype(static_cast<int32_t>(g.dtype));
  return r;
}

absl::StatusOr<KvGeometry> FromGeometryRecord(const KvGeometryRecord& r) {
  if (r.dtype() != static_cast<int32_t>(KvDtype::kF32) &&
      r.dtype() != static_cast<int32_t>(KvDtype::kF16)) {
    return absl::InvalidArgumentError(absl::StrCat("geometry dtype ", r.dtype(), " is unknown"));
  }
  KvGeometry g;
  g.n_layers = r.n_layers();
  g.n_kv_heads = r.n_kv_heads();
  g.head_dim = r.head_dim();
  g.page_tokens = r.page_tokens();
  g.dtype = static_cast<KvDtype>(r.dtype());
  if (absl::Status s = ValidateGeometry(g); !s.ok()) return s;
  return g;
}

namespace {

// The record's geometry after checking it and kv_length.
absl::StatusOr<KvGeometry> CheckShape(const SessionRecord& record) {
  absl::StatusOr<KvGeometry> g = FromGeometryRecord(record.geometry());
  if (!g.ok()) return g;
  if (record.kv_length() < 0 || record.kv_length() > record.tokens_size()) {
    return absl::InvalidArgumentError(absl::StrCat("kv_length ", record.kv_length(),
                                                   " is outside [0, ", record.tokens_size(),
                                                   "] (the token count)"));
  }
  return g;
}

std::vector<PageHash> ExpectedHashes(const SessionRecord& record, const KvGeometry& g) {
  return ChainPageHashes(record.model_fingerprint(), g,
                         std::span<const int32_t>(record.tokens().data(), record.tokens_size()),
                         record.kv_length());
}

}  // namespace

absl::Status FillPageHashes(SessionRecord* record) {
  absl::StatusOr<KvGeometry> g = CheckShape(*record);
  if (!g.ok()) return g.status();
  record->clear_page_hashes();
  for (const PageHash& h : ExpectedHashes(*record, *g)) record->add_page_hashes(std::string(h.view()));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PageHash>> CheckSessionRecord(const SessionRecord& record) {
  absl::StatusOr<KvGeometry> g = CheckShape(record);
  if (!g.ok()) return g.status();
  std::vector<PageHash> expected = ExpectedHashes(record, *g);
  if (static_cast<size_t>(record.page_hashes_size()) != expected.size()) {
    return absl::InvalidArgumentError(absl::StrCat("record has ", record.page_hashes_size(),
                                                   " page hashes, its kv_length ",
                                                   record.kv_length(), " needs ",
                                                   expected.size()));
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    if (record.page_hashes(static_cast<int>(i)) != expected[i].view()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "page_hashes[", i, "] is not the hash of the record's tokens (expected ",
          expected[i].hex(), ")"));
    }
  }
  return expected;
}

// Reference-count and record-index changes prepared alongside one
// WriteBatch. They reach the store's in-memory state (Apply) only after
// the batch is durable, so a failed write leaves that state as it was.
class SessionStore::Change {
 public:
  explicit Change(SessionStore* store) : store_(store) {}

  // Whether the page is stored now or is written by this change.
  bool Held(const PageHash& h) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return store_->pages_.contains(h) || written_.contains(h);
  }
  void AddPage(const PageHash& h, int64_t bytes) {
    written_.insert(h);
    delta_[h].bytes = bytes;
  }
  // Sets (refs given) or erases (nullopt) the record `id` of `index`: its
  // new pages gain a reference, the replaced record's pages lose one.
  void SetRecord(RecordIndex* index, const std::string& id, std::optional<RecordRefs> refs)
      ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (auto it = index->find(id); it != index->end()) {
      for (const PageHash& h : it->second.pages) --delta_[h].refs;
    }
    if (refs.has_value()) {
      for (const PageHash& h : refs->pages) ++delta_[h].refs;
    }
    records_.push_back({index, id, std::move(refs)});
  }

  // Adds to `batch` the delete of every page whose count drops to zero.
  int64_t CollectGarbage(rocksdb::WriteBatch* batch) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    int64_t deleted = 0;
    for (const auto& [hash, delta] : delta_) {
      auto it = store_->pages_.find(hash);
      const int64_t before = it == store_->pages_.end() ? 0 : it->second.refs;
      ABSL_RAW_CHECK(before + delta.refs >= 0, "page reference count below zero");
      if (before > 0 && before + delta.refs == 0) {
        batch->Delete(store_->pages_cf_, rocksdb::Slice(hash.view()));
        ++deleted;
      }
    }
    return deleted;
  }

  void Apply() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (const auto& [hash, delta] : delta_) {
      store_->page_references_ += delta.refs;
      auto it = store_->pages_.find(hash);
      if (it == store_->pages_.end()) {
        if (delta.refs > 0) {
          store_->pages_.emplace(hash, PageRef{delta.refs, delta.bytes});
          store_->page_bytes_ += delta.bytes;
        }
      } else if (it->second.refs + delta.refs == 0) {
        store_->page_bytes_ -= it->second.bytes;
        store_->pages_.erase(it);
      } else {
        it->second.refs += delta.refs;
      }
    }
    for (auto& [index, id, refs] : records_) {
      if (refs.has_value()) {
        (*index)[id] = *std::move(refs);
      } else {
        index->erase(id);
      }
    }
  }

 private:
  SessionStore* store_;
  absl::flat_hash_map<PageHash, PageRef> delta_;  // refs: change; bytes: of written pages
  absl::flat_hash_set<PageHash> written_;
  struct RecordChange {
    RecordIndex* index;
    std::string id;
    std::optional<RecordRefs> refs;
  };
  std::vector<RecordChange> records_;
};

absl::StatusOr<std::unique_ptr<SessionStore>> SessionStore::Open(const std::string& dir,
                                                                   const StoreOptions& options) {
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.keep_log_file_num = 4;
  // The small record families would otherwise pin write-ahead logs full of
  // pages (up to RocksDB's default of gigabytes) and make restarts replay
  // them; this flushes them once the logs pass 256 MiB.
  db_options.max_total_wal_size = uint64_t{256} << 20;

  rocksdb::ColumnFamilyOptions record_options;  // RocksDB defaults (compressed)
  rocksdb::ColumnFamilyOptions page_options;
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
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, dir, families, &handles, &raw);
  if (!s.ok()) return FromRocks(s, absl::StrCat("open session store ", dir));
  std::unique_ptr<SessionStore> store(
      new SessionStore(options, std::unique_ptr<rocksdb::DB>(raw), std::move(handles)));
  if (absl::Status v = store->CheckFormatVersion(); !v.ok()) return v;
  return store;
}

SessionStore::SessionStore(const StoreOptions& options, std::unique_ptr<rocksdb::DB> db,
                             std::vector<rocksdb::ColumnFamilyHandle*> handles)
    : options_(options),
      db_(std::move(db)),
      handles_(std::move(handles)),
      meta_(handles_[0]),
      sessions_cf_(handles_[1]),
      checkpoints_cf_(handles_[2]),
      pages_cf_(handles_[3]) {}

SessionStore::~SessionStore() {
  for (rocksdb::ColumnFamilyHandle* h : handles_) db_->DestroyColumnFamilyHandle(h);
  db_->Close().PermitUncheckedError();
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
    return Write(&batch);
  }
  if (!s.ok()) return FromRocks(s, "read format version");
  int version = 0;
  if (!absl::SimpleAtoi(value, &version)) {
    return absl::DataLossError(absl::StrCat("session store format version '", value,
                                            "' is not a number"));
  }
  if (version != kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat("session store format version ", version,
                                                      " (this build reads ", kFormatVersion,
                                                      ")"));
  }
  return absl::OkStatus();
}

absl::Status SessionStore::RequireLoaded() const {
  if (!loaded_) return absl::FailedPreconditionError("SessionStore: LoadAll has not been called");
  return absl::OkStatus();
}

absl::Status SessionStore::Write(rocksdb::WriteBatch* batch) {
  rocksdb::WriteOptions write_options;
  write_options.sync = options_.sync_writes;
  return FromRocks(db_->Write(write_options, batch), "session store write");
}

absl::Status SessionStore::Commit(Change& change, rocksdb::WriteBatch* batch,
                                   WriteStats* stats) {
  const int64_t deleted = change.CollectGarbage(batch);
  if (absl::Status s = Write(batch); !s.ok()) return s;
  change.Apply();
  if (stats != nullptr) stats->pages_deleted += deleted;
  return absl::OkStatus();
}

absl::Status SessionStore::LoadAll(std::vector<SessionRecord>* sessions,
                                    std::vector<CheckpointRecord>* checkpoints,
                                    std::vector<CorruptEntry>* corrupt) {
  absl::MutexLock lock(&mu_);
  absl::flat_hash_map<PageHash, PageRef> pages;
  RecordIndex session_index, checkpoint_index;

  // Reads one family into `out` and `index`, counting page references.
  auto load = [&](rocksdb::ColumnFamilyHandle* family, CorruptEntry::Kind kind, auto* out,
                  RecordIndex* index) {
    using Record = typename std::remove_pointer_t<decltype(out)>::value_type;
    rocksdb::ReadOptions read_options;
    read_options.fill_cache = false;
    return ForEachEntry(db_.get(), family, read_options, [&](std::string_view key,
                                                             std::string_view value) {
      Record record;
      RecordRefs refs;
      absl::Status s = ReadRecord(key, value, &record, &refs.pages);
      for (size_t i = 0; i < refs.pages.size(); ++i) {
        PageRef& ref = pages[refs.pages[i]];
        ++ref.refs;
        if (s.ok()) {
          const SessionRecord& session = SessionOf(record);
          const KvGeometry g = *FromGeometryRecord(session.geometry());
          ref.bytes = static_cast<int64_t>(
              EncodedPageBytes(g, PageTokensAt(g, session.kv_length(), static_cast<int>(i))));
        }
      }
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
  sessions->clear();
  checkpoints->clear();
  if (corrupt != nullptr) corrupt->clear();
  if (absl::Status s = load(sessions_cf_, CorruptEntry::Kind::kSession, sessions, &session_index);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = load(checkpoints_cf_, CorruptEntry::Kind::kCheckpoint, checkpoints,
                            &checkpoint_index);
      !s.ok()) {
    return s;
  }

  pages_ = std::move(pages);
  sessions_ = std::move(session_index);
  checkpoints_ = std::move(checkpoint_index);
  page_bytes_ = 0;
  page_references_ = 0;
  for (const auto& [hash, ref] : pages_) {
    page_bytes_ += ref.bytes;
    page_references_ += ref.refs;
  }
  loaded_ = true;
  return absl::OkStatus();
}

absl::Status SessionStore::PutSession(
    const SessionRecord& record,
    absl::FunctionRef<absl::StatusOr<std::string>(int page_index)> encode_missing,
    WriteStats* stats) {
  return PutSessions(
      std::span<const SessionRecord>(&record, 1),
      [&](int, int page_index) { return encode_missing(page_index); }, stats);
}

absl::Status SessionStore::PutSessions(
    std::span<const SessionRecord> records,
    absl::FunctionRef<absl::StatusOr<std::string>(int record_index, int page_index)>
        encode_missing,
    WriteStats* stats) {
  // Everything that needs no lock first: checks, hashes, serialisation.
  std::vector<std::vector<PageHash>> hashes;
  std::vector<KvGeometry> geometries;
  std::vector<std::string> values;
  absl::flat_hash_set<std::string_view> ids;
  for (const SessionRecord& record : records) {
    if (record.id().empty()) return absl::InvalidArgumentError("session record without an id");
    if (!ids.insert(record.id()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("session '", record.id(), "' appears twice in one write"));
    }
    absl::StatusOr<std::vector<PageHash>> h = CheckSessionRecord(record);
    if (!h.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("session '", record.id(), "': ", std::string(h.status().message())));
    }
    hashes.push_back(*std::move(h));
    geometries.push_back(*FromGeometryRecord(record.geometry()));
    values.push_back(EncodeRecordValue(record));
  }

  absl::MutexLock lock(&mu_);
  if (absl::Status s = RequireLoaded(); !s.ok()) return s;
  rocksdb::WriteBatch batch;
  Change change(this);
  WriteStats written;
  for (size_t r = 0; r < records.size(); ++r) {
    const KvGeometry& g = geometries[r];
    for (size_t i = 0; i < hashes[r].size(); ++i) {
      const PageHash& hash = hashes[r][i];
      if (change.Held(hash)) {
        ++written.pages_reused;
        continue;
      }
      const int page_index = static_cast<int>(i);
      absl::StatusOr<std::string> page = encode_missing(static_cast<int>(r), page_index);
      if (!page.ok()) return page.status();
      const int n_tokens = PageTokensAt(g, records[r].kv_length(), page_index);
      absl::StatusOr<EncodedPageInfo> info = ReadPageHeader(*page);
      if (!info.ok() || !(info->geometry == g) || info->n_tokens != n_tokens) {
        return absl::InvalidArgumentError(absl::StrCat(
            "session '", records[r].id(), "': encode_missing(", page_index,
            ") is not a page of ", DescribeGeometry(g), " with ", n_tokens, " tokens",
            info.ok() ? "" : absl::StrCat(": ", std::string(info.status().message()))));
      }
      if (rocksdb::Status put = batch.Put(pages_cf_, rocksdb::Slice(hash.view()), *page);
          !put.ok()) {
        return FromRocks(put, absl::StrCat("batch page ", hash.hex()));
      }
      change.AddPage(hash, static_cast<int64_t>(page->size()));
      ++written.pages_written;
      written.bytes_written += static_cast<int64_t>(page->size());
    }
    batch.Put(sessions_cf_, records[r].id(), values[r]);
    written.bytes_written += static_cast<int64_t>(values[r].size());
    change.SetRecord(&sessions_, records[r].id(), RecordRefs{std::move(hashes[r])});
  }
  if (absl::Status s = Commit(change, &batch, &written); !s.ok()) return s;
  if (stats != nullptr) *stats = written;
  return absl::OkStatus();
}

absl::Status SessionStore::DeleteRecord(rocksdb::ColumnFamilyHandle* family,
                                         RecordIndex* index, const std::string& kind,
                                         const std::string& id, WriteStats* stats) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = RequireLoaded(); !s.ok()) return s;
  if (!index->contains(id)) return absl::NotFoundError(absl::StrCat(kind, " '", id, "' not found"));
  rocksdb::WriteBatch batch;
  batch.Delete(family, id);
  Change change(this);
  change.SetRecord(index, id, std::nullopt);
  WriteStats written;
  if (absl::Status s = Commit(change, &batch, &written); !s.ok()) return s;
  if (stats != nullptr) *stats = written;
  return absl::OkStatus();
}

absl::Status SessionStore::DeleteSession(const std::string& id, WriteStats* stats) {
  return DeleteRecord(sessions_cf_, &sessions_, "session", id, stats);
}

absl::Status SessionStore::DeleteCheckpoint(const std::string& id, WriteStats* stats) {
  return DeleteRecord(checkpoints_cf_, &checkpoints_, "checkpoint", id, stats);
}

absl::Status SessionStore::PutCheckpoint(const CheckpointRecord& record, WriteStats* stats) {
  if (record.id().empty()) return absl::InvalidArgumentError("checkpoint record without an id");
  absl::StatusOr<std::vector<PageHash>> hashes = CheckSessionRecord(record.session());
  if (!hashes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint '", record.id(), "': ",
                                                   std::string(hashes.status().message())));
  }
  const std::string value = EncodeRecordValue(record);

  absl::MutexLock lock(&mu_);
  if (absl::Status s = RequireLoaded(); !s.ok()) return s;
  for (const PageHash& h : *hashes) {
    if (!pages_.contains(h)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint '", record.id(), "' references page ", h.hex(), " the store does not hold"));
    }
  }
  rocksdb::WriteBatch batch;
  batch.Put(checkpoints_cf_, record.id(), value);
  WriteStats written;
  written.pages_reused = static_cast<int64_t>(hashes->size());
  written.bytes_written = static_cast<int64_t>(value.size());
  Change change(this);
  change.SetRecord(&checkpoints_, record.id(), RecordRefs{*std::move(hashes)});
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
  std::vector<PageHash> pages;
  if (absl::Status r = ReadRecord(id, value, &record, &pages); !r.ok()) return r;
  return record;
}

}  // namespace

absl::StatusOr<SessionRecord> SessionStore::GetSession(const std::string& id) const {
  return GetRecord<SessionRecord>(db_.get(), sessions_cf_, "session", id);
}

absl::StatusOr<CheckpointRecord> SessionStore::GetCheckpoint(const std::string& id) const {
  return GetRecord<CheckpointRecord>(db_.get(), checkpoints_cf_, "checkpoint", id);
}

absl::StatusOr<std::string> SessionStore::GetPage(const PageHash& hash) const {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), pages_cf_, rocksdb::Slice(hash.view()),
                               &value);
  if (!s.ok()) return FromRocks(s, absl::StrCat("page ", hash.hex()));
  return value;
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

bool SessionStore::HasPage(const PageHash& hash) const {
  absl::ReaderMutexLock lock(&mu_);
  return pages_.contains(hash);
}

StoreStats SessionStore::Stats() const {
  absl::ReaderMutexLock lock(&mu_);
  StoreStats stats{.pages = static_cast<int64_t>(pages_.size()),
                   .page_bytes = page_bytes_,
                   .page_references = page_references_};
  for (const auto& [id, refs] : sessions_) (refs.corrupt ? stats.corrupt_records : stats.sessions)++;
  for (const auto& [id, refs] : checkpoints_) {
    (refs.corrupt ? stats.corrupt_records : stats.checkpoints)++;
  }
  return stats;
}

absl::Status SessionStore::PutMeta(const std::string& key, const std::string& value) {
  if (key == kFormatVersionKey) {
    return absl::InvalidArgumentError(absl::StrCat("meta key '", key, "' is reserved"));
  }
  rocksdb::WriteBatch batch;
  batch.Put(meta_, key, value);
  absl::MutexLock lock(&mu_);
  return Write(&batch);
}

absl::StatusOr<std::string> SessionStore::GetMeta(const std::string& key) const {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), meta_, key, &value);
  if (!s.ok()) return FromRocks(s, absl::StrCat("meta '", key, "'"));
  return value;
}

absl::StatusOr<VerifyReport> SessionStore::Verify() const {
  // The counts and a RocksDB snapshot taken under the lock describe the same
  // state: writers change both only while holding it.
  absl::flat_hash_map<PageHash, PageRef> referenced;
  const rocksdb::Snapshot* snapshot = nullptr;
  {
    absl::ReaderMutexLock lock(&mu_);
    if (absl::Status s = RequireLoaded(); !s.ok()) return s;
    referenced = pages_;
    snapshot = db_->GetSnapshot();
  }
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
        absl::Status page = CheckEncodedPage(value).status();
        if (page.ok() && it != referenced.end() && it->second.bytes != 0 &&
            it->second.bytes != static_cast<int64_t>(value.size())) {
          page = absl::DataLossError(absl::StrCat("page is ", value.size(),
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
