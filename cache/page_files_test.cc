// PageFiles on the real file system, and the session store's page files
// over real RocksDB: what a crash between a page file and its batch leaves
// is collected at the next start, a failed or refused write leaves no
// file, and the last reference's delete removes the file.
#include "cache/page_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cache/fault_injection_fs.h"
#include "cache/page_codec.h"
#include "cache/session_store.h"
#include "cache/store_test_records.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/file_system.h"
#include "tests/scratch_dir.h"

namespace kvs {
namespace {

namespace fs = std::filesystem;

KvGeometry Geometry() {
  return {.n_layers = 2, .n_kv_heads = 2, .head_dim = 8, .page_tokens = 4, .dtype = KvDtype::kF16};
}

SessionRecord Session(const std::string& id, int n_tokens, int32_t first) {
  return TestSessionRecord(id, Geometry(), n_tokens, first);
}

PageHash HashOf(const SessionRecord& r, int page) { return PageHashOf(r, page); }

std::string EncodedPageOf(const SessionRecord& r, int page) {
  std::vector<uint8_t> ram(Geometry().page_bytes());
  for (size_t i = 0; i < ram.size(); ++i) ram[i] = static_cast<uint8_t>(HashOf(r, page).bytes[i % 16] + i);
  return EncodePage(Geometry(), ram.data(), PageTokensAt(Geometry(), r.kv_length(), page));
}

// The names in `dir`, sorted.
std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  if (!fs::exists(dir)) return names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string FileNameOf(const PageHash& hash) { return absl::StrCat(hash.hex(), ".kvpage"); }

// Matches an absl::StatusOr<std::string> that is OK and holds `expected`.
MATCHER_P(HoldsBytes, expected, "is OK and holds the expected bytes") {
  if (!arg.ok()) {
    *result_listener << arg.status();
    return false;
  }
  return *arg == expected;
}

// ReadIntoDirect of `hash`'s file, asked to be `file_bytes` long and split
// as the store splits it (header, payload): the two parts joined, or the
// error.
absl::StatusOr<std::string> ReadDirectly(const PageFiles& files, const PageHash& hash, size_t file_bytes,
                                         PageFiles::DirectBuffer* buffer) {
  std::string header(kPageHeaderBytes, '\0'), payload(file_bytes - kPageHeaderBytes, '\0');
  absl::Status s = files.ReadIntoDirect(hash, header.data(), header.size(), payload.data(), payload.size(), buffer);
  if (!s.ok()) return s;
  return header + payload;
}

class PageFilesTest : public testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(files_.CreateDir().ok()); }

  ScratchDir scratch_{"page_files_test"};
  const std::string dir_ = scratch_.file("pages");  // made by CreateDir
  PageFiles files_{dir_, rocksdb::FileSystem::Default().get()};
  const SessionRecord record_ = Session("s", 12, 100);
};

TEST_F(PageFilesTest, AWrittenPageReadsBackWholeAndSplit) {
  const std::string encoded = EncodedPageOf(record_, 1);
  ASSERT_TRUE(files_.Write(HashOf(record_, 1), encoded, /*sync=*/true).ok());
  ASSERT_TRUE(files_.SyncDir().ok());
  EXPECT_EQ(Names(dir_), std::vector<std::string>{FileNameOf(HashOf(record_, 1))});
  EXPECT_EQ(*files_.Read(HashOf(record_, 1)), encoded);

  std::string header(kPageHeaderBytes, '\0'), payload(encoded.size() - kPageHeaderBytes, '\0');
  ASSERT_TRUE(files_.ReadInto(HashOf(record_, 1), header.data(), header.size(), payload.data(),
                              payload.size())
                  .ok());
  EXPECT_EQ(header + payload, encoded);
  // A full page's payload is the in-RAM page: what lets a restore read it
  // straight into its pool page.
  EXPECT_EQ(payload.size(), Geometry().page_bytes());
  EXPECT_TRUE(CheckSplitPage(Geometry(), header, reinterpret_cast<const uint8_t*>(payload.data()),
                             payload.size())
                  .ok());
}

TEST_F(PageFilesTest, APageWrittenInPartsIsTheFileOfItsWholeEncoding) {
  const std::string encoded = EncodedPageOf(record_, 1);
  const std::string_view header = std::string_view(encoded).substr(0, kPageHeaderBytes);
  const std::string_view payload = std::string_view(encoded).substr(kPageHeaderBytes);
  ASSERT_TRUE(files_.Write(HashOf(record_, 1), header, payload, /*sync=*/true).ok());
  EXPECT_EQ(*files_.Read(HashOf(record_, 1)), encoded);
  EXPECT_TRUE(files_.Holds(HashOf(record_, 1), header, encoded.size()));
  EXPECT_EQ(Names(dir_), std::vector<std::string>{FileNameOf(HashOf(record_, 1))});  // no temporary left
}

TEST_F(PageFilesTest, ReadIntoRefusesAFileOfAnotherLength) {
  const std::string encoded = EncodedPageOf(record_, 0);
  ASSERT_TRUE(files_.Write(HashOf(record_, 0), encoded, false).ok());
  std::string header(kPageHeaderBytes, '\0'), payload(encoded.size() - kPageHeaderBytes, '\0');
  // Asked for one byte less than the file holds, then one more.
  absl::Status s = files_.ReadInto(HashOf(record_, 0), header.data(), header.size(),
                                   payload.data(), payload.size() - 1);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  payload.push_back('\0');
  s = files_.ReadInto(HashOf(record_, 0), header.data(), header.size(), payload.data(),
                      payload.size());
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
}

// ReadIntoDirect where the file system takes O_DIRECT (else it says
// UNIMPLEMENTED and the caller reads buffered: checked first).
TEST_F(PageFilesTest, ADirectReadGivesReadIntosBytesAndRefusesAnotherLength) {
  const std::string encoded = EncodedPageOf(record_, 0);
  ASSERT_TRUE(files_.Write(HashOf(record_, 0), encoded, false).ok());
  if (!files_.ReadsDirect(HashOf(record_, 0))) GTEST_SKIP() << "this file system has no direct reads";
  PageFiles::DirectBuffer buffer(encoded.size());
  ASSERT_NE(buffer.data(), nullptr);
  EXPECT_THAT(ReadDirectly(files_, HashOf(record_, 0), encoded.size(), &buffer), HoldsBytes(encoded));
  // The file is one byte longer, then one byte shorter, than asked for.
  absl::StatusOr<std::string> read = ReadDirectly(files_, HashOf(record_, 0), encoded.size() - 1, &buffer);
  EXPECT_TRUE(absl::IsDataLoss(read.status())) << read.status();
  EXPECT_NE(read.status().message().find("longer"), std::string::npos) << read.status();
  read = ReadDirectly(files_, HashOf(record_, 0), encoded.size() + 1, &buffer);
  EXPECT_TRUE(absl::IsDataLoss(read.status())) << read.status();
  EXPECT_NE(read.status().message().find("truncated"), std::string::npos) << read.status();
  // No buffer, or one too small for the file asked for and a byte more: the caller reads buffered.
  EXPECT_TRUE(absl::IsUnimplemented(ReadDirectly(files_, HashOf(record_, 0), buffer.size(), &buffer).status()));
  EXPECT_TRUE(absl::IsUnimplemented(ReadDirectly(files_, HashOf(record_, 0), encoded.size(), nullptr).status()));
  // A missing file is NOT_FOUND, as for ReadInto.
  EXPECT_TRUE(absl::IsNotFound(ReadDirectly(files_, HashOf(record_, 1), encoded.size(), &buffer).status()));
}

// Direct reads and writes share one kept set of buffers: what a write
// used, a read of a file that fits reuses (no memory mapped anew).
TEST_F(PageFilesTest, ADirectBufferKeptAfterUseServesTheNextReadOrWriteThatFitsIt) {
  const std::string encoded = EncodedPageOf(record_, 0);
  std::unique_ptr<PageFiles::DirectBuffer> buffer = files_.TakeDirectBuffer(encoded.size());
  ASSERT_NE(buffer->data(), nullptr);
  EXPECT_GT(buffer->size(), encoded.size());
  const char* memory = buffer->data();
  files_.KeepDirectBuffer(std::move(buffer));
  // A file that fits: the kept buffer again, and it still reads a page.
  buffer = files_.TakeDirectBuffer(encoded.size());
  EXPECT_EQ(buffer->data(), memory);
  ASSERT_TRUE(files_.Write(HashOf(record_, 0), encoded, false).ok());
  if (files_.ReadsDirect(HashOf(record_, 0))) {
    EXPECT_THAT(ReadDirectly(files_, HashOf(record_, 0), encoded.size(), buffer.get()), HoldsBytes(encoded));
  }
  // A file larger than every kept buffer gets a new one that fits it.
  const size_t size = buffer->size();
  files_.KeepDirectBuffer(std::move(buffer));
  std::unique_ptr<PageFiles::DirectBuffer> larger = files_.TakeDirectBuffer(size);
  ASSERT_NE(larger->data(), nullptr);
  EXPECT_NE(larger->data(), memory);
  EXPECT_GT(larger->size(), size);
}

TEST_F(PageFilesTest, ADirectReadOfAFileOfWholeSectorsSeesItsEnd) {
  // 4,096 bytes: the read's end falls on a sector boundary, not inside one.
  std::string file(4096, '\0');
  for (size_t i = 0; i < file.size(); ++i) file[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(files_.Write(HashOf(record_, 2), file, false).ok());
  if (!files_.ReadsDirect(HashOf(record_, 2))) GTEST_SKIP() << "this file system has no direct reads";
  PageFiles::DirectBuffer buffer(file.size());
  EXPECT_THAT(ReadDirectly(files_, HashOf(record_, 2), file.size(), &buffer), HoldsBytes(file));
  EXPECT_TRUE(absl::IsDataLoss(ReadDirectly(files_, HashOf(record_, 2), file.size() - 1, &buffer).status()));
}

TEST_F(PageFilesTest, LikelyCachedSaysWhetherThePageCacheHoldsTheFilesLastByte) {
  const PageHash hash = HashOf(record_, 0);
  EXPECT_FALSE(files_.LikelyCached(hash, 1));  // no file yet
  const std::string encoded = EncodedPageOf(record_, 0);
  ASSERT_TRUE(files_.Write(hash, encoded, false).ok());
  ASSERT_TRUE(files_.Read(hash).ok());
  EXPECT_TRUE(files_.LikelyCached(hash, encoded.size()));
  EXPECT_FALSE(files_.LikelyCached(hash, 0));
  EXPECT_FALSE(files_.LikelyCached(hash, encoded.size() + 2 * 65536));  // past the file's end
  const int fd = ::open(files_.PathOf(hash).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fdatasync(fd), 0);
  ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  ::close(fd);
  if (files_.LikelyCached(hash, encoded.size())) GTEST_SKIP() << "the page cache keeps this file (tmpfs keeps all)";
  ASSERT_TRUE(files_.Read(hash).ok());
  EXPECT_TRUE(files_.LikelyCached(hash, encoded.size()));
}

// A file system that opens no file for direct writes (as tmpfs without
// O_DIRECT), or whose direct writes fail after the open (as a device that
// refuses the alignment): everything else passes through.
class NoDirectWritesFileSystem : public rocksdb::FileSystemWrapper {
 public:
  enum class Refuse { kOpen, kAppend };
  explicit NoDirectWritesFileSystem(Refuse refuse)
      : FileSystemWrapper(rocksdb::FileSystem::Default()), refuse_(refuse) {}
  const char* Name() const override { return "NoDirectWritesFileSystem"; }
  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    if (!options.use_direct_writes) return target()->NewWritableFile(f, options, r, dbg);
    ++direct_opens;
    if (refuse_ == Refuse::kOpen) return rocksdb::IOStatus::IOError("Invalid argument");
    rocksdb::IOStatus s = target()->NewWritableFile(f, options, r, dbg);
    if (s.ok()) *r = std::make_unique<FailingAppends>(std::move(*r));
    return s;
  }
  int direct_opens = 0;

 private:
  class FailingAppends : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    using FSWritableFileOwnerWrapper::FSWritableFileOwnerWrapper;
    rocksdb::IOStatus Append(const rocksdb::Slice&, const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
      return rocksdb::IOStatus::IOError("Invalid argument");
    }
  };
  const Refuse refuse_;
};

// The encoded page of `bytes` bytes (a header's worth of bytes and more),
// for lengths the codec's pages would not have.
std::string FileOfBytes(size_t bytes, int seed) {
  std::string file(bytes, '\0');
  for (size_t i = 0; i < file.size(); ++i) file[i] = static_cast<char>(i * 13 + seed);
  return file;
}

TEST_F(PageFilesTest, ADirectWriteLeavesAFileOfExactlyItsBytesAndNoneOfThemInThePageCache) {
  ASSERT_TRUE(files_.WritesDirect());  // the default
  PageFiles buffered(dir_, rocksdb::FileSystem::Default().get(), PageWrites::kBuffered);
  EXPECT_FALSE(buffered.WritesDirect());
  int page = 0;
  // Below, at, just past and well past one 4 KiB block, and a codec page.
  for (const std::string& file : {FileOfBytes(kPageHeaderBytes + 1, 1), FileOfBytes(4096, 2), FileOfBytes(4097, 3),
                                  FileOfBytes(3 * 4096 + 100, 4), EncodedPageOf(record_, 2)}) {
    const PageHash hash = HashOf(record_, page++ % 3);
    const std::string_view header = std::string_view(file).substr(0, kPageHeaderBytes);
    ASSERT_TRUE(files_.Write(hash, header, std::string_view(file).substr(kPageHeaderBytes), /*sync=*/true).ok());
    if (!files_.WritesDirect()) GTEST_SKIP() << "this file system has no direct writes";
    EXPECT_FALSE(files_.LikelyCached(hash, file.size())) << file.size();  // before anything reads it
    EXPECT_TRUE(files_.Holds(hash, header, file.size())) << file.size();  // exactly its length
    EXPECT_EQ(*files_.Read(hash), file);
    // The same bytes written buffered are in the page cache (unless
    // LikelyCached cannot tell), which is what the direct write avoided.
    ASSERT_TRUE(buffered.Write(hash, file, /*sync=*/false).ok());
    EXPECT_TRUE(buffered.LikelyCached(hash, file.size())) << file.size();
    EXPECT_EQ(*files_.Read(hash), file);
  }
  EXPECT_EQ(Names(dir_).size(), 3u);  // no temporary left
}

TEST_F(PageFilesTest, AFileSystemThatOpensNoFileForDirectWritesGetsBufferedWritesFromThenOn) {
  NoDirectWritesFileSystem fs(NoDirectWritesFileSystem::Refuse::kOpen);
  PageFiles files(dir_, &fs);
  const std::string encoded = EncodedPageOf(record_, 0);
  ASSERT_TRUE(files.Write(HashOf(record_, 0), encoded, /*sync=*/true).ok());
  EXPECT_EQ(*files.Read(HashOf(record_, 0)), encoded);
  EXPECT_FALSE(files.WritesDirect());
  ASSERT_TRUE(files.Write(HashOf(record_, 1), EncodedPageOf(record_, 1), /*sync=*/true).ok());
  EXPECT_EQ(fs.direct_opens, 1);  // not asked again
  EXPECT_THAT(Names(dir_),
              testing::UnorderedElementsAre(FileNameOf(HashOf(record_, 0)), FileNameOf(HashOf(record_, 1))));
}

TEST_F(PageFilesTest, ADirectWriteThatFailsAfterItsOpenIsWrittenBufferedAndTheNextTriesDirectAgain) {
  NoDirectWritesFileSystem fs(NoDirectWritesFileSystem::Refuse::kAppend);
  PageFiles files(dir_, &fs);
  for (int page = 0; page < 2; ++page) {
    const std::string encoded = EncodedPageOf(record_, page);
    ASSERT_TRUE(files.Write(HashOf(record_, page), encoded, /*sync=*/true).ok());
    EXPECT_EQ(*files.Read(HashOf(record_, page)), encoded);
    EXPECT_TRUE(files.WritesDirect());
  }
  EXPECT_EQ(fs.direct_opens, 2);
  EXPECT_THAT(Names(dir_),
              testing::UnorderedElementsAre(FileNameOf(HashOf(record_, 0)), FileNameOf(HashOf(record_, 1))));
}

TEST_F(PageFilesTest, WritersOnManyThreadsShareTheWriteBuffersWithoutMixingTheirPages) {
  constexpr int kThreads = 6, kPagesEach = 20;
  std::vector<std::string> files;
  std::vector<PageHash> hashes;
  for (int i = 0; i < kThreads * kPagesEach; ++i) {
    files.push_back(FileOfBytes(kPageHeaderBytes + 1000 + 977 * static_cast<size_t>(i), i));
    hashes.push_back(HashOf(Session(absl::StrCat("w", i), 4, i), 0));
  }
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = t * kPagesEach; i < (t + 1) * kPagesEach; ++i) {
        if (!files_.Write(hashes[i], files[i], /*sync=*/false).ok()) ++failures;
      }
    });
  }
  for (std::thread& w : writers) w.join();
  EXPECT_EQ(failures.load(), 0);
  for (size_t i = 0; i < files.size(); ++i) EXPECT_EQ(*files_.Read(hashes[i]), files[i]) << i;
}

// The default file system, recording which directories are registered
// with it for direct I/O (RegisterDbPaths) and forwarding the calls, which
// FileSystemWrapper alone would not.
class RegistrationRecordingFileSystem : public rocksdb::FileSystemWrapper {
 public:
  RegistrationRecordingFileSystem() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char* Name() const override { return "RegistrationRecordingFileSystem"; }
  rocksdb::Status RegisterDbPaths(const std::vector<std::string>& paths) override {
    rocksdb::Status s = target()->RegisterDbPaths(paths);
    for (const std::string& p : paths) (s.ok() ? registered : refused).push_back(p);
    return s;
  }
  rocksdb::Status UnregisterDbPaths(const std::vector<std::string>& paths) override {
    for (const std::string& p : paths) unregistered.push_back(p);
    return target()->UnregisterDbPaths(paths);
  }
  std::vector<std::string> registered, refused, unregistered;
};

// Registered, RocksDB's POSIX file system looks up the directory's block
// size once instead of at every direct open (page_files.h).
TEST_F(PageFilesTest, ItsDirectoryIsRegisteredForDirectIoOnceItExistsAndUnregisteredAtTheEnd) {
  RegistrationRecordingFileSystem fs;
  const std::string dir = scratch_.file("registered");
  {
    PageFiles files(dir, &fs);
    EXPECT_FALSE(files.ReadsDirect(HashOf(record_, 0)));  // no directory yet: nothing registered
    EXPECT_THAT(fs.registered, testing::IsEmpty());
    ASSERT_TRUE(files.CreateDir().ok());
    ASSERT_TRUE(files.CreateDir().ok());
    const std::string encoded = EncodedPageOf(record_, 0);
    ASSERT_TRUE(files.Write(HashOf(record_, 0), encoded, /*sync=*/true).ok());
    files.ReadsDirect(HashOf(record_, 0));
    EXPECT_THAT(fs.registered, testing::ElementsAre(dir));  // once
    EXPECT_EQ(*files.Read(HashOf(record_, 0)), encoded);
    if (files.ReadsDirect(HashOf(record_, 0))) {
      PageFiles::DirectBuffer buffer(encoded.size());
      EXPECT_THAT(ReadDirectly(files, HashOf(record_, 0), encoded.size(), &buffer), HoldsBytes(encoded));
    }
    EXPECT_THAT(fs.unregistered, testing::IsEmpty());
  }
  EXPECT_THAT(fs.unregistered, testing::ElementsAre(dir));
}

TEST_F(PageFilesTest, AMissingPageIsNotFoundAndRemovingItIsOk) {
  EXPECT_TRUE(absl::IsNotFound(files_.Read(HashOf(record_, 0)).status()));
  char header[kPageHeaderBytes];
  EXPECT_TRUE(absl::IsNotFound(files_.ReadInto(HashOf(record_, 0), header, sizeof(header), nullptr, 0)));
  EXPECT_TRUE(files_.Remove(HashOf(record_, 0)).ok());
}

TEST_F(PageFilesTest, TheListingSeparatesPagesFromOtherFiles) {
  ASSERT_TRUE(files_.Write(HashOf(record_, 0), EncodedPageOf(record_, 0), false).ok());
  std::ofstream(absl::StrCat(dir_, "/", HashOf(record_, 1).hex(), ".kvpage.tmp")) << "half";
  std::ofstream(absl::StrCat(dir_, "/README")) << "not a page";
  std::ofstream(absl::StrCat(dir_, "/", std::string(32, 'G'), ".kvpage")) << "not hex";
  absl::StatusOr<PageFiles::Listing> listing = files_.ListOnDisk();
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_EQ(listing->pages, std::vector<PageHash>{HashOf(record_, 0)});
  EXPECT_THAT(listing->others,
              testing::UnorderedElementsAre(std::string(32, 'G') + ".kvpage",
                                            HashOf(record_, 1).hex() + ".kvpage.tmp", "README"));
}

// The store's page files.
class StorePageFilesTest : public testing::Test {
 protected:
  void SetUp() override {
    Open();
  }
  void TearDown() override { store_.reset(); }
  void Open(StoreOptions options = {}) {
    store_.reset();
    absl::StatusOr<std::unique_ptr<SessionStore>> store = SessionStore::Open(dir_, options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    std::vector<SessionRecord> sessions;
    std::vector<CheckpointRecord> checkpoints;
    ASSERT_TRUE(store_->LoadAll(&sessions, &checkpoints).ok());
  }
  absl::Status Put(const SessionRecord& r) {
    return store_->PutSession(r, [&](int page) { return EncodedPageOf(r, page); });
  }
  std::vector<std::string> FilesOf(std::initializer_list<const SessionRecord*> records) {
    std::vector<std::string> names;
    for (const SessionRecord* r : records) {
      for (int i = 0; i < r->page_hashes_size(); ++i) names.push_back(FileNameOf(HashOf(*r, i)));
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
  }
  std::string pages_dir() const { return dir_ + "/pages"; }

  ScratchDir scratch_{"store_page_files_test"};
  const std::string dir_ = scratch_.string();
  std::unique_ptr<SessionStore> store_;
};

TEST_F(StorePageFilesTest, EveryStoredPageHasOneFileAndTheLastReferenceRemovesIt) {
  const SessionRecord a = Session("a", 12, 100);
  const SessionRecord b = Session("b", 20, 100);  // a's 3 pages, then 2 more
  ASSERT_TRUE(Put(a).ok());
  ASSERT_TRUE(Put(b).ok());
  EXPECT_EQ(Names(pages_dir()), FilesOf({&a, &b}));
  EXPECT_EQ(Names(pages_dir()).size(), 5u);
  ASSERT_TRUE(store_->DeleteSession("b").ok());
  EXPECT_EQ(Names(pages_dir()), FilesOf({&a}));
  ASSERT_TRUE(store_->DeleteSession("a").ok());
  EXPECT_TRUE(Names(pages_dir()).empty());
}

TEST_F(StorePageFilesTest, FilesACrashLeftBeforeTheirBatchAreDeletedAtTheNextStart) {
  const SessionRecord a = Session("a", 12, 100);
  ASSERT_TRUE(Put(a).ok());
  store_.reset();
  // A crash after b's page files, before b's batch: files without entries,
  // and a temporary of a page being written.
  const SessionRecord b = Session("b", 8, 900);
  PageFiles files(pages_dir(), rocksdb::FileSystem::Default().get());
  for (int i = 0; i < b.page_hashes_size(); ++i) ASSERT_TRUE(files.Write(HashOf(b, i), EncodedPageOf(b, i), true).ok());
  std::ofstream(absl::StrCat(pages_dir(), "/", HashOf(b, 0).hex(), ".kvpage.tmp")) << "half a page";
  std::ofstream(absl::StrCat(pages_dir(), "/NOTES")) << "an operator's file stays";
  Open();
  std::vector<std::string> want = FilesOf({&a});
  want.push_back("NOTES");
  std::sort(want.begin(), want.end());
  EXPECT_EQ(Names(pages_dir()), want);
  for (int i = 0; i < a.page_hashes_size(); ++i) EXPECT_TRUE(store_->GetPage(HashOf(a, i)).ok());
  EXPECT_TRUE(store_->Verify()->ok());
  // b can still be written in full afterwards.
  ASSERT_TRUE(Put(b).ok());
  EXPECT_TRUE(store_->GetPage(HashOf(b, 0)).ok());
}

TEST_F(StorePageFilesTest, AFileLeftAfterItsDeleteWasCommittedIsDeletedAtTheNextStart) {
  const SessionRecord a = Session("a", 12, 100);
  ASSERT_TRUE(Put(a).ok());
  const std::string kept = *store_->GetPage(HashOf(a, 1));
  ASSERT_TRUE(store_->DeleteSession("a").ok());
  store_.reset();
  // A crash between the batch and the unlink: the file is back.
  PageFiles files(pages_dir(), rocksdb::FileSystem::Default().get());
  ASSERT_TRUE(files.Write(HashOf(a, 1), kept, true).ok());
  Open();
  EXPECT_TRUE(Names(pages_dir()).empty());
}

TEST_F(StorePageFilesTest, AWriteThatFailsPartWayLeavesNoPageFile) {
  const SessionRecord a = Session("a", 12, 100);
  ASSERT_TRUE(Put(a).ok());
  auto faulty = std::make_shared<FaultInjectionFileSystem>();
  StoreOptions options;
  options.file_system = faulty;
  Open(options);
  // Room for about one and a half pages of b's four.
  faulty->SetSpaceLimit(static_cast<int64_t>(EncodedPageBytes(Geometry(), 4) * 3 / 2));
  const SessionRecord b = Session("b", 16, 900);
  const absl::Status s = Put(b);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_NE(s.message().find("disk full"), std::string::npos) << s;
  EXPECT_EQ(Names(pages_dir()), FilesOf({&a}));
  faulty->Heal();
  ASSERT_TRUE(Put(b).ok());
  EXPECT_EQ(Names(pages_dir()), FilesOf({&a, &b}));
}

TEST_F(StorePageFilesTest, AStagedPageIsUsedByTheWriteThatNeedsItNotWrittenAgain) {
  const SessionRecord b = Session("b", 16, 900);
  const size_t full = EncodedPageBytes(Geometry(), 4);
  std::vector<PageHash> staged;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<bool> wrote = store_->StagePage(HashOf(b, i), full, [&] {
      return absl::StatusOr<std::string>(EncodedPageOf(b, i));
    });
    ASSERT_TRUE(wrote.ok()) << wrote.status();
    EXPECT_TRUE(*wrote);
    staged.push_back(HashOf(b, i));
  }
  // Staged is not stored: no entry, no reference.
  EXPECT_EQ(store_->Stats().pages, 0);
  EXPECT_FALSE(store_->HasPage(HashOf(b, 0)));
  EXPECT_EQ(Names(pages_dir()).size(), 3u);
  struct stat before;
  ASSERT_EQ(::stat(absl::StrCat(pages_dir(), "/", FileNameOf(HashOf(b, 0))).c_str(), &before), 0);

  WriteStats stats;
  ASSERT_TRUE(store_->PutSession(b, [&](int page) { return EncodedPageOf(b, page); }, &stats).ok());
  EXPECT_EQ(stats.pages_written, 4);
  EXPECT_EQ(Names(pages_dir()), FilesOf({&b}));
  struct stat after;
  ASSERT_EQ(::stat(absl::StrCat(pages_dir(), "/", FileNameOf(HashOf(b, 0))).c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);  // the staged file itself, not a rewrite
  store_->DiscardStaged(staged);  // held now: nothing is deleted
  EXPECT_EQ(Names(pages_dir()), FilesOf({&b}));
  Open();
  for (int i = 0; i < b.page_hashes_size(); ++i) EXPECT_TRUE(store_->GetPage(HashOf(b, i)).ok()) << i;
  EXPECT_TRUE(store_->Verify()->ok());
}

// Staging writes without the store's lock. A mutation that commits the
// same page meanwhile, from bytes of its own (an import made on another CPU
// kind rounds differently; here other bytes of the same length), keeps its
// file: the staged bytes never replace a page a record references.
TEST_F(StorePageFilesTest, AStagedPageNeverReplacesThePageAMutationCommittedMeanwhile) {
  const SessionRecord b = Session("b", 12, 900);
  const size_t full = EncodedPageBytes(Geometry(), 4);
  auto committed_bytes = [&](int page) {
    std::vector<uint8_t> ram(Geometry().page_bytes(), static_cast<uint8_t>(0x5a + page));
    return EncodePage(Geometry(), ram.data(), PageTokensAt(Geometry(), b.kv_length(), page));
  };
  ASSERT_NE(committed_bytes(0), EncodedPageOf(b, 0));
  absl::StatusOr<bool> wrote = store_->StagePage(HashOf(b, 0), full, [&] {
    // After StagePage found the page absent, before it writes: an import.
    EXPECT_TRUE(store_->PutSession(b, [&](int page) { return committed_bytes(page); }).ok());
    return absl::StatusOr<std::string>(EncodedPageOf(b, 0));
  });
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  EXPECT_FALSE(*wrote);
  EXPECT_EQ(Names(pages_dir()), FilesOf({&b}));  // no temporary left
  absl::StatusOr<std::string> page = store_->GetPage(HashOf(b, 0));
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(*page, committed_bytes(0));
  EXPECT_TRUE(store_->Verify()->ok());
}

TEST_F(StorePageFilesTest, StagedPagesNoRecordTookAreDeletedByDiscardOrAtTheNextStart) {
  const SessionRecord a = Session("a", 12, 100);
  ASSERT_TRUE(Put(a).ok());
  const SessionRecord b = Session("b", 12, 900);
  const size_t full = EncodedPageBytes(Geometry(), 4);
  auto stage = [&](int i) {
    return store_->StagePage(HashOf(b, i), full, [&] { return absl::StatusOr<std::string>(EncodedPageOf(b, i)); });
  };
  // Staging a page the store holds writes nothing.
  absl::StatusOr<bool> held = store_->StagePage(HashOf(a, 0), full, [&] {
    return absl::StatusOr<std::string>(EncodedPageOf(a, 0));
  });
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE(*held);
  ASSERT_TRUE(*stage(0));
  EXPECT_FALSE(*stage(0));  // its whole file is there already
  const std::vector<PageHash> staged = {HashOf(b, 0)};
  store_->DiscardStaged(staged);
  EXPECT_EQ(Names(pages_dir()), FilesOf({&a}));
  // A crash instead of the discard: the next start deletes the file.
  ASSERT_TRUE(*stage(1));
  Open();
  EXPECT_EQ(Names(pages_dir()), FilesOf({&a}));
  // A staged page of the wrong size is refused, and leaves no file.
  absl::StatusOr<bool> wrong = store_->StagePage(HashOf(b, 2), full + 1, [&] {
    return absl::StatusOr<std::string>(EncodedPageOf(b, 2));
  });
  EXPECT_TRUE(absl::IsInvalidArgument(wrong.status())) << wrong.status();
  EXPECT_EQ(Names(pages_dir()), FilesOf({&a}));
}

TEST_F(StorePageFilesTest, AWriteUnderTheFreeSpaceFloorWritesNoPageFile) {
  const SessionRecord a = Session("a", 12, 100);
  ASSERT_TRUE(Put(a).ok());
  StoreOptions options;
  options.min_free_bytes = int64_t{1} << 60;  // more than any disk has
  Open(options);
  const absl::Status s = Put(Session("b", 12, 900));
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_EQ(Names(pages_dir()), FilesOf({&a}));
  EXPECT_TRUE(store_->GetPage(HashOf(a, 0)).ok());  // reads work
}

}  // namespace
}  // namespace kvs
