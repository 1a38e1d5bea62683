// SessionStore: sessions, checkpoints and their KV pages, records in
// RocksDB and page bytes in one file per page, with pages stored once
// however many records share them.
//
// Column families (docs/storage-format.md gives every byte):
//   default      meta: the store format version, free-form key/values
//   sessions     session id    -> CRC-32C + SessionRecord
//   checkpoints  checkpoint id -> CRC-32C + CheckpointRecord
//   pages        PageHash (16 bytes) -> the page's 48-byte header
//                (format 1 stores: the whole encoded page)
// and <dir>/pages/<hash>.kvpage, the whole encoded page
// (cache/page_codec.h, cache/page_files.h).
//
// Page files keep RocksDB out of the page bytes' way: a restore reads a
// full page from its file straight into its pool page and checks its
// CRC-32C once, in hardware, where RocksDB would copy it twice and check
// it in software (Debian's RocksDB is built without SSE4.2); a write puts
// each page byte once to disk, not into the log, the memtable and a blob
// file. Order of a mutation: the new pages' files (synced, then their
// directory), then the batch of records and page entries, then the files
// of the pages it freed are deleted. A crash between the steps leaves
// page files without a page entry; LoadAll deletes them.
//
// A page is content-addressed by its chained hash (cache/page_hash.h), so
// records with a common token prefix reference the same pages. The store
// keeps a reference count per page in memory: every session and every
// checkpoint record references each of its page_hashes once. A mutation
// writes the records, the pages no record had yet, and deletes the pages
// whose count drops to zero, all in ONE RocksDB WriteBatch: after a crash
// the store holds the state before or after each mutation, never a mix,
// and an acknowledged mutation (OK returned) is never lost (with
// sync_writes, not even on power loss). The in-memory counts change only
// once the batch is durable, so a failed write leaves them consistent
// with the disk.
//
// Startup: Open(), then LoadAll() once; LoadAll builds the reference counts
// and mutations return FAILED_PRECONDITION before it. Reads (Get*, GetPage,
// ReadPage) work as soon as Open returns.
//
// Record invariants (cache/record_validation.h), checked on every write
// (INVALID_ARGUMENT) and every read (DATA_LOSS): a valid geometry, 0 <=
// kv_length <= tokens, and page_hashes == ChainPageHashes(model_fingerprint,
// geometry, tokens, kv_length), so a record can never name a page for other
// tokens. A write hashes only the pages its reference record did not
// already verify: the stored session of the same id, else (a fork) the
// stored session named by parent_session_id; a checkpoint's reference is
// the stored session it copies. WriteStats.pages_hashed counts the SHA-256
// page hashes a write computed.
//
// A full disk: RocksDB must never meet ENOSPC itself (Debian's build keeps
// its assertions, and a log writer reused after a failed write aborts the
// process). So the store refuses, with RESOURCE_EXHAUSTED naming the
// directory and its free space, every mutation that adds data while free
// space is under a floor (StoreOptions::min_free_bytes, at least
// kMinFreeBytes), which covers what RocksDB may still write on its own:
// memtables are small (kWriteBufferBytes) and compactions check free space
// first (RocksDB's SstFileManager). Deletes always run. A store opened on a
// disk under the floor opens read-only (RocksDB writes nothing then):
// reads work, and the first mutation after space returns reopens it for
// writing.
//
// Failed writes: a failed RocksDB write (disk full, I/O error) returns its
// error and leaves the store as it was: nothing of the batch is visible, on
// disk or in Stats(). RocksDB then refuses writes; each later mutation
// first checks that the disk takes writes again (a small probe file: while
// it fails, the mutation fails with its error and RocksDB is left alone),
// then resumes RocksDB (DB::Resume), or, where RocksDB cannot resume (a
// failed log write is fatal to it), closes and reopens the database and
// re-reads the reference counts from disk. So writes resume by themselves
// once the disk recovers; the caller never reopens the store. Reads keep
// working while writes fail, wait during a reopen, and return UNAVAILABLE
// if a reopen failed (until a later mutation reopens the store). Caveat of
// every log-based store: a batch whose log write reached the file but
// whose sync failed may reappear after a reopen.
//
// Parts: record_codec.h frames values, record_validation.h checks
// records, ref_count_change.h keeps the reference counts; this class
// holds them together over RocksDB. Its implementation: session_store.cc
// (its life: open, recovery, LoadAll, Stats, meta, Verify),
// session_store_write.cc (mutations), session_store_read.cc (reads).
//
// Thread safety: every method is safe to call from any thread. Mutations
// (and LoadAll) are serialised by an internal mutex, which is held while
// PutSession(s) calls the caller's encode_missing; reads take only a
// shared lock that a reopen after a failed write holds exclusively.
// Errors: NOT_FOUND (no such record), DATA_LOSS (corrupt or missing data),
// INVALID_ARGUMENT (bad record), FAILED_PRECONDITION (LoadAll not called;
// checkpoint of pages the store does not hold; store written by a newer
// format), RESOURCE_EXHAUSTED (disk full), INTERNAL (other I/O errors),
// UNAVAILABLE (RocksDB busy; the store is closed after a failed reopen).
#ifndef KVSESSION_CACHE_SESSION_STORE_H_
#define KVSESSION_CACHE_SESSION_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cache/kv_geometry.h"
#include "cache/page_codec.h"
#include "cache/page_files.h"
#include "cache/page_hash.h"
#include "cache/record_validation.h"
#include "cache/ref_count_change.h"
#include "cache/session_record.pb.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
class Env;
class FileSystem;
class WriteBatch;
}  // namespace rocksdb

namespace kvs {

struct StoreOptions {
  // Sync the write-ahead log before a mutation returns. Off, an
  // acknowledged mutation survives a crash of the process but not of the
  // machine.
  bool sync_writes = true;
  // The file system RocksDB uses; null (production) is the default one.
  // Tests pass a fault-injecting wrapper (cache/fault_injection_fs.h).
  std::shared_ptr<rocksdb::FileSystem> file_system;
  // Free-space floor: a mutation that adds data (any Put) is refused with
  // RESOURCE_EXHAUSTED, before anything is written, while the store's file
  // system has less free space than this (raised to kMinFreeBytes). Deletes
  // always run (they are how space comes back).
  int64_t min_free_bytes = 0;
  // How page files are written (cache/page_files.h): straight to the disk
  // where the file system takes it, leaving no page-cache copy, or
  // buffered, leaving one for a restore soon after.
  PageWrites page_writes = PageWrites::kDirect;
};

// The smallest effective floor, and the memtable size it is sized for.
inline constexpr int64_t kMinFreeBytes = int64_t{32} << 20;
inline constexpr size_t kWriteBufferBytes = size_t{8} << 20;

// What one mutation wrote.
struct WriteStats {
  int64_t pages_written = 0;  // pages new to the store (encode_missing calls)
  int64_t pages_reused = 0;   // page references the store already held
  int64_t pages_deleted = 0;  // pages whose last reference went away
  int64_t bytes_written = 0;  // value bytes in the batch: new pages and records
  int64_t pages_hashed = 0;   // SHA-256 page hashes computed to verify the records
};

struct StoreStats {
  int64_t pages = 0;            // distinct pages held
  int64_t page_bytes = 0;       // their encoded size
  int64_t page_references = 0;  // sum of their reference counts
  int64_t sessions = 0;
  int64_t checkpoints = 0;
  int64_t corrupt_records = 0;  // records on disk that LoadAll could not read
};

// A stored value the store could not read.
struct CorruptEntry {
  enum class Kind { kSession, kCheckpoint, kPage };
  Kind kind;
  std::string key;      // record id, or the page's 16 key bytes
  absl::Status status;  // DATA_LOSS: why
};

// The result of Verify(): what the pages column family holds against what
// the records reference.
struct VerifyReport {
  int64_t pages_checked = 0;
  std::vector<PageHash> missing_pages;     // referenced, not stored
  std::vector<PageHash> orphan_pages;      // stored, referenced by no record
  std::vector<CorruptEntry> corrupt_pages;  // stored, fail their checks
  bool ok() const {
    return missing_pages.empty() && orphan_pages.empty() && corrupt_pages.empty();
  }
};

class SessionStore {
 public:
  // Format 2 keeps page bytes in page files (cache/page_files.h) and a
  // page's header in the pages family; format 1 kept whole pages there.
  // This build reads both, writes pages the format-2 way, and marks a
  // format-1 store 2 when it opens it for writing (a format-1 build then
  // refuses it, as it could not read its page files).
  static constexpr int kFormatVersion = 2;
  static constexpr int kOldestFormatVersion = 1;
  // Column family names and the meta key of the format version.
  static constexpr char kMetaFamily[] = "default";
  static constexpr char kSessionsFamily[] = "sessions";
  static constexpr char kCheckpointsFamily[] = "checkpoints";
  static constexpr char kPagesFamily[] = "pages";
  static constexpr char kFormatVersionKey[] = "format_version";

  // Opens the store in `dir`, creating it if missing. FAILED_PRECONDITION if
  // the directory holds a store of another format version (or is locked by
  // another open store: INTERNAL with RocksDB's message).
  static absl::StatusOr<std::unique_ptr<SessionStore>> Open(const std::string& dir,
                                                             const StoreOptions& options);
  ~SessionStore();
  SessionStore(const SessionStore&) = delete;
  SessionStore& operator=(const SessionStore&) = delete;

  // Reads every record into `sessions` and `checkpoints` (replacing their
  // contents) and (re)builds the page reference counts. A record that
  // fails its checksum, does not parse or breaks an invariant is left out
  // of the results, listed in `corrupt` (if not null) and logged; it
  // stays on disk, counted in Stats().corrupt_records, until a Put or
  // Delete of its id replaces it. Fails only if RocksDB cannot be read.
  absl::Status LoadAll(std::vector<SessionRecord>* sessions,
                       std::vector<CheckpointRecord>* checkpoints,
                       std::vector<CorruptEntry>* corrupt = nullptr);

  // Writes `record`, replacing the session of the same id, in one batch
  // with every page it references that the store does not hold yet:
  // encode_missing(i) gives the encoding of page i (index into
  // record.page_hashes). It is called under the store's lock, once per
  // missing page, so no other writer can add or remove the page meanwhile;
  // its error aborts the write (nothing is written). The returned page
  // must have the record's geometry and PageTokensAt(i) tokens
  // (INVALID_ARGUMENT otherwise); a full page may be returned as parts
  // viewing its pool page (EncodePageParts), written without a copy. Pages
  // only the replaced record referenced are deleted in the same batch.
  absl::Status PutSession(
      const SessionRecord& record,
      absl::FunctionRef<absl::StatusOr<PageEncoding>(int page_index)> encode_missing,
      WriteStats* stats = nullptr);

  // PutSession for several records of distinct ids in one atomic batch
  // (Fork writes its N branches at once). encode_missing(r, i) encodes page
  // i of records[r]; a page shared by several records is encoded once.
  absl::Status PutSessions(
      std::span<const SessionRecord> records,
      absl::FunctionRef<absl::StatusOr<PageEncoding>(int record_index, int page_index)>
          encode_missing,
      WriteStats* stats = nullptr);

  // Deletes the session and the pages no other record references, in one
  // batch. NOT_FOUND if there is no such session, judged after recovering
  // from a failed write (whose record may then be in the store, and is
  // deleted like any other): the recovery's errors come first.
  absl::Status DeleteSession(const std::string& id, WriteStats* stats = nullptr);

  // Writes `record`, replacing the checkpoint of the same id. Every page of
  // record.session must already be held (FAILED_PRECONDITION otherwise):
  // a checkpoint is taken of a session the store holds.
  absl::Status PutCheckpoint(const CheckpointRecord& record, WriteStats* stats = nullptr);
  // PutCheckpoint that also writes, in the same batch, the pages the store
  // does not hold: encode_missing(i) gives page i of record.session(), as
  // PutSession's does (an imported checkpoint brings its pages along).
  absl::Status PutCheckpoint(
      const CheckpointRecord& record,
      absl::FunctionRef<absl::StatusOr<PageEncoding>(int page_index)> encode_missing,
      WriteStats* stats = nullptr);
  // NOT_FOUND if there is no such checkpoint (judged as DeleteSession's).
  absl::Status DeleteCheckpoint(const std::string& id, WriteStats* stats = nullptr);

  // The stored record: NOT_FOUND, or DATA_LOSS if it is corrupt.
  absl::StatusOr<SessionRecord> GetSession(const std::string& id) const;
  absl::StatusOr<CheckpointRecord> GetCheckpoint(const std::string& id) const;

  // The encoded page (cache/page_codec.h), unchecked; NOT_FOUND if absent.
  absl::StatusOr<std::string> GetPage(const PageHash& hash) const;
  // GetPage + DecodePage into `page` (geometry.page_bytes() long), requiring
  // `n_tokens` tokens: what restore calls for page i of a record, with
  // n_tokens = PageTokensAt(geometry, kv_length, i). DATA_LOSS if the page
  // is missing, corrupt, or not of that geometry and length.
  absl::Status ReadPage(const PageHash& hash, const KvGeometry& geometry, int n_tokens,
                        uint8_t* page) const;
  // One page of a restore: its hash, the tokens its record needs
  // (PageTokensAt), and where its slots go (geometry.page_bytes() long).
  struct PageRead {
    PageHash hash;
    int n_tokens = 0;
    uint8_t* page = nullptr;
  };
  // ReadPage for many pages, at disk/memory speed: the page entries by
  // RocksDB MultiGet in batches, on up to `threads` threads at once; a full
  // page's file is read straight into its destination (one copy) and its
  // CRC-32C checked there once, in hardware; a partial page is read
  // (cold: straight from the disk into the reader's direct buffer, as a
  // full page), checked and copied by DecodePageInto (a format-1 page too,
  // from RocksDB's pinned buffer). Returns OK or the error of the first page (in
  // `reads` order) that failed, its index in *failed_index (if not null):
  // DATA_LOSS as ReadPage (missing, corrupt, other geometry or length),
  // UNAVAILABLE (store reopening), INTERNAL; on error the destinations hold
  // unspecified data (callers discard them).
  absl::Status ReadPages(std::span<const PageRead> reads, const KvGeometry& geometry,
                         int threads = 1, size_t* failed_index = nullptr) const;
  // Maps and populates the buffers a cold ReadPages reads pages of
  // `geometry` into (PageFiles::DirectBuffer, one per direct reader), so
  // the first restore after a start does not pay for them: call after
  // LoadAll. Does nothing if the store holds no page file or its file
  // system has no direct reads. Memory: about 2 MiB per reader for
  // Qwen3-0.6B's pages, kept while the store lives.
  void PrepareDirectReads(const KvGeometry& geometry) const;
  // Staging: a page's file written ahead of the record that will reference
  // it (the engine stages each page a prefill fills while the prefill goes
  // on, so the write that ends the call has only the last pages left).
  // StagePage writes the file of page `hash`, encoded by encode() (an
  // encoding of exactly `encoded_bytes`), unless the store holds the page
  // or its whole file is already there; returns whether it wrote. The write
  // runs without the store's lock, and the file takes its name under it,
  // unless a mutation committed the page meanwhile (then its file stays,
  // and StagePage returns false); the file has no entry, so a crash
  // leaves it to LoadAll to delete. A later mutation that needs the page
  // uses the file instead of writing it again (PutSession's encode_missing
  // is still called, to check the page). Errors: RESOURCE_EXHAUSTED (disk
  // full, or under the free-space floor), INTERNAL (I/O), encode()'s own;
  // on error no file is left.
  absl::StatusOr<bool> StagePage(const PageHash& hash, size_t encoded_bytes,
                                 absl::FunctionRef<absl::StatusOr<PageEncoding>()> encode);
  // Ends the staging of pages StagePage wrote: the files of those the
  // store does not hold (no record came to reference them) are deleted.
  void DiscardStaged(std::span<const PageHash> hashes);

  // Whether some record references the page (so it is stored). False
  // before LoadAll.
  bool HasPage(const PageHash& hash) const;

  StoreStats Stats() const;

  // Free-form metadata in the default column family. The key
  // kFormatVersionKey is the store's own (INVALID_ARGUMENT).
  absl::Status PutMeta(const std::string& key, const std::string& value);
  absl::StatusOr<std::string> GetMeta(const std::string& key) const;  // NOT_FOUND

  // Reads every stored page (the whole pages column family: as slow as
  // reading the store) and checks it against the reference counts and its
  // checksums. Requires LoadAll. Mutations may run meanwhile; the report is
  // of one consistent point in time.
  absl::StatusOr<VerifyReport> Verify() const;

 private:
  SessionStore(const std::string& dir, const StoreOptions& options,
               std::unique_ptr<rocksdb::Env> env, std::unique_ptr<rocksdb::DB> db,
               std::vector<rocksdb::ColumnFamilyHandle*> handles);
  // Opens the RocksDB database of the store (env null: the default).
  // Opens RocksDB; `read_only` writes nothing (a disk under the floor).
  static absl::Status OpenDb(const std::string& dir, rocksdb::Env* env, bool read_only,
                             std::unique_ptr<rocksdb::DB>* db,
                             std::vector<rocksdb::ColumnFamilyHandle*>* handles);
  void SetDb(std::unique_ptr<rocksdb::DB> db, std::vector<rocksdb::ColumnFamilyHandle*> handles);
  void CloseDb();
  // UNAVAILABLE: db_ is closed because a reopen failed.
  static absl::Status Reopening();
  // Reads every record into `table` (and, if not null, the other outputs:
  // see LoadAll).
  absl::Status ReadTable(PageRefTable* table, std::vector<SessionRecord>* sessions,
                         std::vector<CheckpointRecord>* checkpoints,
                         std::vector<CorruptEntry>* corrupt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK if a small file can be written and synced in the store's directory.
  absl::Status ProbeWritable() const;
  // After a failed write: once the disk takes writes again, DB::Resume, or
  // if RocksDB cannot resume, reopen and re-read the counts from disk.
  absl::Status Recover(bool frees_space = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Recover() if the last write failed: what every mutation does first,
  // before it builds its batch (a reopen replaces the handles).
  absl::Status RecoverIfWriteFailed(bool frees_space = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The store's format version, read: OK for a version this build reads,
  // or for an empty store without one; FAILED_PRECONDITION for a newer
  // format, DATA_LOSS for data without a version. *needs_record: the
  // version must be written before the store is (a new store, an older
  // format). Every open checks it, read-only ones too.
  absl::Status ReadFormatVersion(bool* needs_record) const;
  // What the first open for writing does, whether at Open or when a store
  // opened read-only (a full disk) is reopened for writing: checks the
  // format version and records this build's where ReadFormatVersion asks
  // (a few bytes, not held to the floor: the disk took a probe write, and
  // a delete that frees space may be what reopens it), and creates the
  // page files' directory.
  absl::Status PrepareForWrites() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RequireLoaded() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Writes `batch`; a failure makes the next mutation Recover first.
  absl::Status Write(rocksdb::WriteBatch* batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RESOURCE_EXHAUSTED if `batch` adds data while free space is under the
  // floor (StoreOptions::min_free_bytes).
  absl::Status CheckFreeSpace(const rocksdb::WriteBatch& batch) const;
  // "the session store in DIR has N MiB free of M MiB (floor F MiB)".
  std::string FreeSpaceText() const;
  // Adds to `batch` the deletes of the pages `change` frees, writes it, then
  // applies `change` to the in-memory table.
  absl::Status Commit(RefCountChange& change, rocksdb::WriteBatch* batch, WriteStats* stats)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a new version of session `id` (forked from `parent`) is verified
  // against: the stored record of that id, else of `parent`; null if none.
  std::shared_ptr<const VerifiedPages> ReferenceFor(const std::string& id,
                                                    const std::string& parent) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The page files one mutation wrote, and the staged ones it uses.
  struct MutationFiles {
    std::vector<PageHash> written;
    int64_t staged_used = 0;
  };
  // Writes the file of a page new to the store (or uses its staged file)
  // and puts its header into `batch`; `files` collects the files written,
  // so that a mutation failing before its batch removes them (staged files
  // stay: they are their stager's). The first page of a mutation checks
  // the free-space floor.
  absl::Status AddPage(const PageHash& hash, const PageEncoding& encoded, rocksdb::WriteBatch* batch,
                       MutationFiles* files) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // For a mutation that wrote or used page files: syncs their directory
  // (with sync_writes) if `built` is OK, else removes the files it wrote;
  // returns the result.
  absl::Status SettlePageFiles(absl::Status built, const MutationFiles& files)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RESOURCE_EXHAUSTED while free space is under the floor.
  absl::Status CheckFloor() const;
  // Deletes page files without a page entry, and temporaries: what a
  // crash between a page file and its batch, or a batch and its deletes,
  // left.
  void CollectPageFiles() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The encoding of a stored page whose pages-family value is `value`: the
  // value itself (format 1), or its page file, which must begin with the
  // value (format 2). DATA_LOSS if the file is missing or disagrees.
  absl::StatusOr<std::string> ResolvePage(const PageHash& hash, std::string_view value) const;
  // Decodes the page whose pages-family value is `value` into read.page:
  // a full page in a file is read straight into it, from the disk
  // (PageFiles::ReadIntoDirect) when `direct` is given and the file is not
  // in the page cache. NOT_FOUND if its file is missing, DATA_LOSS if
  // anything fails its checks.
  // `direct_works` (if given) is set false when a direct read fails, so
  // the rest of a restore reads buffered.
  absl::Status ReadStoredPageInto(const PageRead& read, const KvGeometry& geometry, std::string_view value,
                                  int* stored_tokens, PageFiles::DirectBuffer* direct = nullptr,
                                  std::atomic<bool>* direct_works = nullptr) const;
  // Whether ReadStoredPageInto reads a page file of `file_bytes` from the
  // disk directly: a direct buffer is given, direct reads have not failed
  // in this restore (`direct_works`), and the file is not in the page cache.
  bool DirectReadFits(const PageHash& hash, size_t file_bytes, const PageFiles::DirectBuffer* direct,
                      const std::atomic<bool>* direct_works) const;
  // True if `status` says a direct read cannot be made here (UNIMPLEMENTED):
  // it then clears `direct_works` (if given), and the page is read buffered.
  static bool NoteDirectReadUnavailable(const absl::Status& status, std::atomic<bool>* direct_works);
  absl::Status DeleteRecord(rocksdb::ColumnFamilyHandle* SessionStore::*family, RecordIndex* index,
                            const std::string& kind, const std::string& id,
                            WriteStats* stats) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  const StoreOptions options_;
  std::unique_ptr<rocksdb::Env> env_;  // with options.file_system; outlives db_
  // <dir>/pages, through options.file_system (or the default one).
  const PageFiles page_files_;

  // The database and its handles change only in Recover (a reopen), which
  // holds mu_ and db_mu_ exclusively. Mutations use them under mu_; reads
  // hold db_mu_ shared. db_ is null only after a failed reopen.
  mutable absl::Mutex db_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;  // owned, in family order
  rocksdb::ColumnFamilyHandle* meta_;
  rocksdb::ColumnFamilyHandle* sessions_cf_;
  rocksdb::ColumnFamilyHandle* checkpoints_cf_;
  rocksdb::ColumnFamilyHandle* pages_cf_;

  mutable absl::Mutex mu_;
  bool loaded_ ABSL_GUARDED_BY(mu_) = false;
  // A write failed: RocksDB may refuse writes until resumed.
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  // Opened read-only on a disk under the floor; the first mutation once
  // space is back reopens for writing (through write_failed_ and Recover).
  bool read_only_ ABSL_GUARDED_BY(mu_) = false;
  // Free bytes of the store's file system, or -1 if unknown.
  int64_t FreeBytes() const;
  int64_t floor_bytes() const;
  PageRefTable table_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvs

#endif  // KVSESSION_CACHE_SESSION_STORE_H_
