#include "cache/fault_injection_fs.h"

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace kvs {

using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

struct FaultInjectionFileSystem::State {
  mutable absl::Mutex mu;
  Fault fault ABSL_GUARDED_BY(mu) = Fault::kNone;
  int64_t space_left ABSL_GUARDED_BY(mu) = -1;  // -1: no limit
  int64_t failures ABSL_GUARDED_BY(mu) = 0;
  std::vector<std::string> created ABSL_GUARDED_BY(mu);  // NewWritableFile's names
  std::string read_fault_suffix ABSL_GUARDED_BY(mu);     // "": reads pass
  bool writes_flow ABSL_GUARDED_BY(mu) = true;           // false: HoldWrites
  int held_writes ABSL_GUARDED_BY(mu) = 0;               // waiting for ReleaseWrites

  // OK, or the error of a write of `bytes` bytes (which then uses them up),
  // after any HoldWrites has been released.
  IOStatus Check(uint64_t bytes, bool sync = false) {
    absl::MutexLock lock(&mu);
    if (!writes_flow) {
      ++held_writes;
      mu.Await(absl::Condition(&writes_flow));
      --held_writes;
    }
    if (fault == Fault::kNone && space_left >= 0 && static_cast<uint64_t>(space_left) < bytes) {
      fault = Fault::kNoSpace;
    }
    switch (fault) {
      case Fault::kNone:
        if (space_left >= 0) space_left -= static_cast<int64_t>(bytes);
        return IOStatus::OK();
      case Fault::kNoSpace:
        ++failures;
        return IOStatus::NoSpace("injected fault: no space left on device");
      case Fault::kIoError:
        ++failures;
        return IOStatus::IOError("injected fault: I/O error");
      case Fault::kSyncError:
        if (!sync) return IOStatus::OK();
        ++failures;
        return IOStatus::IOError("injected fault: sync failed");
    }
    return IOStatus::OK();
  }
};

namespace {

using State = FaultInjectionFileSystem::State;

class FaultyWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FaultyWritableFile(std::unique_ptr<rocksdb::FSWritableFile> file, std::shared_ptr<State> state)
      : FSWritableFileOwnerWrapper(std::move(file)), state_(std::move(state)) {}

  IOStatus Append(const Slice& data, const IOOptions& options, IODebugContext* dbg) override {
    if (IOStatus s = state_->Check(data.size()); !s.ok()) return s;
    return target()->Append(data, options, dbg);
  }
  IOStatus Append(const Slice& data, const IOOptions& options,
                  const rocksdb::DataVerificationInfo& info, IODebugContext* dbg) override {
    if (IOStatus s = state_->Check(data.size()); !s.ok()) return s;
    return target()->Append(data, options, info, dbg);
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& options,
                            IODebugContext* dbg) override {
    if (IOStatus s = state_->Check(data.size()); !s.ok()) return s;
    return target()->PositionedAppend(data, offset, options, dbg);
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& options,
                            const rocksdb::DataVerificationInfo& info,
                            IODebugContext* dbg) override {
    if (IOStatus s = state_->Check(data.size()); !s.ok()) return s;
    return target()->PositionedAppend(data, offset, options, info, dbg);
  }
  IOStatus Truncate(uint64_t size, const IOOptions& options, IODebugContext* dbg) override {
    if (IOStatus s = state_->Check(0); !s.ok()) return s;
    return target()->Truncate(size, options, dbg);
  }
  IOStatus Flush(const IOOptions& options, IODebugContext* dbg) override {
    if (IOStatus s = state_->Check(0); !s.ok()) return s;
    return target()->Flush(options, dbg);
  }
  IOStatus Sync(const IOOptions& options, IODebugContext* dbg) override {
    if (IOStatus s = state_->Check(0, /*sync=*/true); !s.ok()) return s;
    return target()->Sync(options, dbg);
  }
  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    if (IOStatus s = state_->Check(0, /*sync=*/true); !s.ok()) return s;
    return target()->Fsync(options, dbg);
  }
  IOStatus RangeSync(uint64_t offset, uint64_t nbytes, const IOOptions& options,
                     IODebugContext* dbg) override {
    if (IOStatus s = state_->Check(0, /*sync=*/true); !s.ok()) return s;
    return target()->RangeSync(offset, nbytes, options, dbg);
  }

 private:
  std::shared_ptr<State> state_;
};

class FaultyRandomRWFile : public rocksdb::FSRandomRWFileOwnerWrapper {
 public:
  FaultyRandomRWFile(std::unique_ptr<rocksdb::FSRandomRWFile> file, std::shared_ptr<State> state)
      : FSRandomRWFileOwnerWrapper(std::move(file)), state_(std::move(state)) {}

  IOStatus Write(uint64_t offset, const Slice& data, const IOOptions& options,
                 IODebugContext* dbg) override {
    if (IOStatus s = state_->Check(data.size()); !s.ok()) return s;
    return target()->Write(offset, data, options, dbg);
  }
  IOStatus Flush(const IOOptions& options, IODebugContext* dbg) override {
    if (IOStatus s = state_->Check(0); !s.ok()) return s;
    return target()->Flush(options, dbg);
  }
  IOStatus Sync(const IOOptions& options, IODebugContext* dbg) override {
    if (IOStatus s = state_->Check(0, /*sync=*/true); !s.ok()) return s;
    return target()->Sync(options, dbg);
  }
  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    if (IOStatus s = state_->Check(0, /*sync=*/true); !s.ok()) return s;
    return target()->Fsync(options, dbg);
  }

 private:
  std::shared_ptr<State> state_;
};

}  // namespace

FaultInjectionFileSystem::FaultInjectionFileSystem(std::shared_ptr<rocksdb::FileSystem> base)
    : FileSystemWrapper(base), state_(std::make_shared<State>()) {}

FaultInjectionFileSystem::~FaultInjectionFileSystem() = default;

void FaultInjectionFileSystem::FailWrites(Fault fault) {
  absl::MutexLock lock(&state_->mu);
  state_->fault = fault;
}

void FaultInjectionFileSystem::SetSpaceLimit(int64_t bytes) {
  absl::MutexLock lock(&state_->mu);
  state_->space_left = bytes < 0 ? 0 : bytes;
}

void FaultInjectionFileSystem::FailReadsOf(std::string suffix) {
  absl::MutexLock lock(&state_->mu);
  state_->read_fault_suffix = std::move(suffix);
}

void FaultInjectionFileSystem::HoldWrites() {
  absl::MutexLock lock(&state_->mu);
  state_->writes_flow = false;
}

void FaultInjectionFileSystem::ReleaseWrites() {
  absl::MutexLock lock(&state_->mu);
  state_->writes_flow = true;
}

int FaultInjectionFileSystem::held_writes() const {
  absl::MutexLock lock(&state_->mu);
  return state_->held_writes;
}

void FaultInjectionFileSystem::Heal() {
  absl::MutexLock lock(&state_->mu);
  state_->fault = Fault::kNone;
  state_->space_left = -1;
  state_->read_fault_suffix.clear();
}

IOStatus FaultInjectionFileSystem::NewRandomAccessFile(const std::string& f, const rocksdb::FileOptions& options,
                                                       std::unique_ptr<rocksdb::FSRandomAccessFile>* r,
                                                       rocksdb::IODebugContext* dbg) {
  {
    absl::MutexLock lock(&state_->mu);
    const std::string& suffix = state_->read_fault_suffix;
    if (!suffix.empty() && f.size() >= suffix.size() &&
        f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0) {
      ++state_->failures;
      return IOStatus::IOError("injected fault: I/O error reading " + f);
    }
  }
  return target()->NewRandomAccessFile(f, options, r, dbg);
}

int64_t FaultInjectionFileSystem::failures() const {
  absl::MutexLock lock(&state_->mu);
  return state_->failures;
}

std::vector<std::string> FaultInjectionFileSystem::CreatedFiles() const {
  absl::MutexLock lock(&state_->mu);
  return state_->created;
}

IOStatus FaultInjectionFileSystem::NewWritableFile(const std::string& f,
                                                   const rocksdb::FileOptions& options,
                                                   std::unique_ptr<rocksdb::FSWritableFile>* r,
                                                   IODebugContext* dbg) {
  if (IOStatus s = state_->Check(0); !s.ok()) return s;
  std::unique_ptr<rocksdb::FSWritableFile> file;
  IOStatus s = target()->NewWritableFile(f, options, &file, dbg);
  if (s.ok()) {
    *r = std::make_unique<FaultyWritableFile>(std::move(file), state_);
    absl::MutexLock lock(&state_->mu);
    state_->created.push_back(f);
  }
  return s;
}

IOStatus FaultInjectionFileSystem::ReopenWritableFile(const std::string& f,
                                                      const rocksdb::FileOptions& options,
                                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                                      IODebugContext* dbg) {
  if (IOStatus s = state_->Check(0); !s.ok()) return s;
  std::unique_ptr<rocksdb::FSWritableFile> file;
  IOStatus s = target()->ReopenWritableFile(f, options, &file, dbg);
  if (s.ok()) *r = std::make_unique<FaultyWritableFile>(std::move(file), state_);
  return s;
}

IOStatus FaultInjectionFileSystem::ReuseWritableFile(const std::string& f, const std::string& old,
                                                     const rocksdb::FileOptions& options,
                                                     std::unique_ptr<rocksdb::FSWritableFile>* r,
                                                     IODebugContext* dbg) {
  if (IOStatus s = state_->Check(0); !s.ok()) return s;
  std::unique_ptr<rocksdb::FSWritableFile> file;
  IOStatus s = target()->ReuseWritableFile(f, old, options, &file, dbg);
  if (s.ok()) *r = std::make_unique<FaultyWritableFile>(std::move(file), state_);
  return s;
}

IOStatus FaultInjectionFileSystem::NewRandomRWFile(const std::string& f,
                                                   const rocksdb::FileOptions& options,
                                                   std::unique_ptr<rocksdb::FSRandomRWFile>* r,
                                                   IODebugContext* dbg) {
  if (IOStatus s = state_->Check(0); !s.ok()) return s;
  std::unique_ptr<rocksdb::FSRandomRWFile> file;
  IOStatus s = target()->NewRandomRWFile(f, options, &file, dbg);
  if (s.ok()) *r = std::make_unique<FaultyRandomRWFile>(std::move(file), state_);
  return s;
}

}  // namespace kvs
