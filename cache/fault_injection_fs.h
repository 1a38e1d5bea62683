// FaultInjectionFileSystem: a RocksDB file system that fails writes on
// demand, for tests of what the session store does when the disk is full
// or failing (in the manner of LevelDB's FaultInjectionTestEnv).
//
// It wraps another file system (the default one unless given) and passes
// every call through, except that while a fault is set:
//   - creating or reopening a file for writing (NewWritableFile,
//     ReopenWritableFile, ReuseWritableFile, NewRandomRWFile) fails, and
//   - on every writable file, Append, PositionedAppend, Flush, Sync, Fsync,
//     RangeSync and Truncate fail,
// with IOStatus::NoSpace() (kNoSpace: the disk is full) or a plain
// IOStatus::IOError() (kIoError). Reads, deletes, renames and Close always
// pass through, so files already written stay readable, except where
// FailReadsOf fails the opening of some files for reading. A failed call
// writes nothing.
//
// SetSpaceLimit(bytes) sets kNoSpace once `bytes` more bytes have been
// appended: the append that would pass the limit fails whole. Heal() clears
// the fault and the limit. Usage with the store:
//
//   auto fs = std::make_shared<FaultInjectionFileSystem>();
//   StoreOptions options;
//   options.file_system = fs;          // SessionStore::Open uses it
//   fs->FailWrites(FaultInjectionFileSystem::Fault::kNoSpace);
//   ...                                // writes fail, reads work
//   fs->Heal();
//
// Thread safety: every method is safe from any thread (RocksDB writes
// from its background threads too). Files opened through it share its
// state, so they may outlive it.
#ifndef KVSESSION_CACHE_FAULT_INJECTION_FS_H_
#define KVSESSION_CACHE_FAULT_INJECTION_FS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rocksdb/file_system.h"

namespace kvs {

class FaultInjectionFileSystem : public rocksdb::FileSystemWrapper {
 public:
  // kSyncError: writes reach the file (the OS's cache), every Sync, Fsync
  // and RangeSync fails with IOError: a write whose outcome is uncertain,
  // as after a failed fsync.
  enum class Fault { kNone, kNoSpace, kIoError, kSyncError };

  explicit FaultInjectionFileSystem(
      std::shared_ptr<rocksdb::FileSystem> base = rocksdb::FileSystem::Default());
  ~FaultInjectionFileSystem() override;

  static const char* kClassName() { return "KvsFaultInjectionFileSystem"; }
  const char* Name() const override { return kClassName(); }

  // Every write from now on fails with `fault` (kNone: none does).
  void FailWrites(Fault fault);
  // Writes succeed until `bytes` more bytes are appended; then kNoSpace.
  void SetSpaceLimit(int64_t bytes);
  // From now on, opening a file for reading (NewRandomAccessFile) whose
  // path ends in `suffix` fails with IOStatus::IOError() ("": none does):
  // a disk that fails reads of one kind of file (".kvpage": page files)
  // while RocksDB reads its own.
  void FailReadsOf(std::string suffix);
  // From now on, every write (as listed above) waits, without failing,
  // until ReleaseWrites: a disk that stalls, for tests of what a call does
  // while its write is under way. held_writes() counts the writes waiting.
  // Heal does not release them.
  void HoldWrites();
  void ReleaseWrites();
  int held_writes() const;
  // No more faults, no limit.
  void Heal();
  // Calls failed so far.
  int64_t failures() const;
  // The path of every file created for writing so far (NewWritableFile),
  // in order: how a test counts the writes of one kind of file.
  std::vector<std::string> CreatedFiles() const;

  struct State;  // shared with the files it opens

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(const std::string& f, const std::string& old,
                                      const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomAccessFile(const std::string& f, const rocksdb::FileOptions& options,
                                        std::unique_ptr<rocksdb::FSRandomAccessFile>* r,
                                        rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomRWFile(const std::string& f, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSRandomRWFile>* r,
                                    rocksdb::IODebugContext* dbg) override;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace kvs

#endif  // KVSESSION_CACHE_FAULT_INJECTION_FS_H_
