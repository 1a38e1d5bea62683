// SessionStore::ReadPages, the restore path: many pages at once, straight
// into their destinations, over a real RocksDB and real page files; bit
// rot in a page file is DATA_LOSS naming the page. Page files the page
// cache does not hold are read from the disk directly, with the same
// checks.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "absl/strings/str_cat.h"
#include "cache/fault_injection_fs.h"
#include "cache/page_codec.h"
#include "cache/record_validation.h"
#include "cache/session_store.h"
#include "cache/store_test_records.h"
#include "gtest/gtest.h"
#include "rocksdb/file_system.h"
#include "tests/scratch_dir.h"

namespace kvs {
namespace {

// 16 KiB pages.
KvGeometry Geometry() {
  return {.n_layers = 2, .n_kv_heads = 2, .head_dim = 64, .page_tokens = 16, .dtype = KvDtype::kF16};
}

// KV for every token but the last, as a session holds it between calls.
SessionRecord Session(const std::string& id, int tokens, int32_t first = 1000) {
  return TestSessionRecord(id, Geometry(), tokens, first, tokens - 1);
}

PageHash HashOf(const SessionRecord& r, int page) { return PageHashOf(r, page); }

std::vector<uint8_t> RamPage(const SessionRecord& r, int page) {
  const PageHash h = HashOf(r, page);
  std::vector<uint8_t> bytes(Geometry().page_bytes());
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(h.bytes[i % 16] * 7 + i / 3);
  return bytes;
}

// Flips one bit of a payload byte of the page file at `path`: the page's
// CRC-32C covers it.
void FlipPayloadBit(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << path;
  f.seekg(kPageHeaderBytes + 1010);
  const char c = static_cast<char>(f.get());
  f.seekp(kPageHeaderBytes + 1010);
  f.put(static_cast<char>(c ^ 0x04));
}

class ReadPagesTest : public testing::Test {
 protected:
  void SetUp() override {
    Reopen();
    record_ = Session("s", 16 * 9 + 5);  // 9 full pages and a partial one
    Put(record_);
  }
  // Stores `r` with its pages (RamPage's bytes).
  void Put(const SessionRecord& r) {
    ASSERT_TRUE(store_
                    ->PutSession(r,
                                 [&](int i) -> absl::StatusOr<std::string> {
                                   return EncodePage(Geometry(), RamPage(r, i).data(),
                                                     PageTokensAt(Geometry(), r.kv_length(), i));
                                 })
                    .ok());
  }
  void TearDown() override { store_.reset(); }
  void Reopen(StoreOptions options = {}) {
    store_.reset();
    absl::StatusOr<std::unique_ptr<SessionStore>> store = SessionStore::Open(dir_, options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    std::vector<SessionRecord> sessions;
    std::vector<CheckpointRecord> checkpoints;
    ASSERT_TRUE(store_->LoadAll(&sessions, &checkpoints).ok());
  }
  // One read per page of the record, into `out` (one page each).
  std::vector<SessionStore::PageRead> Reads(std::vector<std::vector<uint8_t>>& out) {
    std::vector<SessionStore::PageRead> reads;
    out.assign(record_.page_hashes_size(), std::vector<uint8_t>(Geometry().page_bytes(), 0));
    for (int i = 0; i < record_.page_hashes_size(); ++i) {
      reads.push_back({HashOf(record_, i), PageTokensAt(Geometry(), record_.kv_length(), i), out[i].data()});
    }
    return reads;
  }

  // ReadPages of the whole record fails with DATA_LOSS at page `index`,
  // its message holding `word`.
  void ExpectDataLossAt(size_t index, absl::string_view word) {
    std::vector<std::vector<uint8_t>> out;
    size_t failed = 0;
    const absl::Status s = store_->ReadPages(Reads(out), Geometry(), 2, &failed);
    EXPECT_TRUE(absl::IsDataLoss(s)) << s;
    EXPECT_EQ(failed, index);
    EXPECT_NE(s.message().find(word), std::string::npos) << s;
  }

  ScratchDir scratch_{"read_pages_test"};
  const std::string dir_ = scratch_.string();
  std::unique_ptr<SessionStore> store_;
  SessionRecord record_;
};

TEST_F(ReadPagesTest, ReadsEveryPageIntoItsDestinationAsReadPageDoes) {
  for (int threads : {1, 2, 4}) {
    std::vector<std::vector<uint8_t>> out;
    const std::vector<SessionStore::PageRead> reads = Reads(out);
    ASSERT_TRUE(store_->ReadPages(reads, Geometry(), threads).ok()) << threads;
    for (size_t i = 0; i < reads.size(); ++i) {
      std::vector<uint8_t> one(Geometry().page_bytes(), 0);
      ASSERT_TRUE(store_->ReadPage(reads[i].hash, Geometry(), reads[i].n_tokens, one.data()).ok());
      EXPECT_EQ(out[i], one) << "page " << i << ", " << threads << " threads";
    }
  }
}

// A disk that fails reads is not data loss: the page reads once the disk
// does, and the caller (a restore) must not tell its client the session is
// gone.
TEST_F(ReadPagesTest, AnIoErrorReadingAPageFileIsInternalNotDataLossAndReadsWorkOnceTheDiskDoes) {
  auto fs = std::make_shared<FaultInjectionFileSystem>();
  StoreOptions options;
  options.file_system = fs;
  Reopen(options);
  fs->FailReadsOf(".kvpage");
  std::vector<std::vector<uint8_t>> out;
  size_t failed = 99;
  absl::Status s = store_->ReadPages(Reads(out), Geometry(), 2, &failed);
  EXPECT_TRUE(absl::IsInternal(s)) << s;
  EXPECT_EQ(failed, 0u);
  std::vector<uint8_t> one(Geometry().page_bytes(), 0);
  s = store_->ReadPage(HashOf(record_, 1), Geometry(), 16, one.data());
  EXPECT_TRUE(absl::IsInternal(s)) << s;
  fs->Heal();
  ASSERT_TRUE(store_->ReadPages(Reads(out), Geometry(), 2).ok());
  EXPECT_EQ(out[4], RamPage(record_, 4));
}

TEST_F(ReadPagesTest, AMissingPageIsDataLossNamingIt) {
  std::vector<std::vector<uint8_t>> out;
  std::vector<SessionStore::PageRead> reads = Reads(out);
  reads[6].hash = HashOf(Session("other", 16 * 2, 5000), 0);
  size_t failed = 0;
  const absl::Status s = store_->ReadPages(reads, Geometry(), 2, &failed);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_EQ(failed, 6u);
  EXPECT_NE(s.message().find("missing"), std::string::npos) << s;
}

TEST_F(ReadPagesTest, AWrongTokenCountIsDataLoss) {
  std::vector<std::vector<uint8_t>> out;
  std::vector<SessionStore::PageRead> reads = Reads(out);
  reads.back().n_tokens = 16;  // the last page holds 4
  size_t failed = 0;
  EXPECT_TRUE(absl::IsDataLoss(store_->ReadPages(reads, Geometry(), 1, &failed)));
  EXPECT_EQ(failed, reads.size() - 1);
}

TEST_F(ReadPagesTest, ReadsBackExactlyThePagesThatWereWritten) {
  std::vector<std::vector<uint8_t>> out;
  const std::vector<SessionStore::PageRead> reads = Reads(out);
  ASSERT_TRUE(store_->ReadPages(reads, Geometry(), 2).ok());
  for (int i = 0; i + 1 < static_cast<int>(reads.size()); ++i) EXPECT_EQ(out[i], RamPage(record_, i)) << i;
  // The partial last page: its slots of every block, the rest untouched.
  const KvGeometry g = Geometry();
  const int last_tokens = reads.back().n_tokens;
  ASSERT_LT(last_tokens, g.page_tokens);
  const std::vector<uint8_t> last = RamPage(record_, static_cast<int>(reads.size()) - 1);
  for (size_t block = 0; block < g.page_bytes() / g.block_bytes(); ++block) {
    for (size_t b = 0; b < g.block_bytes(); ++b) {
      const size_t at = block * g.block_bytes() + b;
      ASSERT_EQ(out.back()[at], b < g.slot_offset(last_tokens) ? last[at] : 0) << at;
    }
  }
}

TEST_F(ReadPagesTest, BitRotInAPageFileIsDataLoss) {
  // Flip one payload byte of page 3's file: the page's CRC-32C covers it.
  const std::string path = absl::StrCat(dir_, "/pages/", HashOf(record_, 3).hex(), ".kvpage");
  store_.reset();
  FlipPayloadBit(path);
  Reopen();
  std::vector<std::vector<uint8_t>> out;
  size_t failed = 0;
  const absl::Status s = store_->ReadPages(Reads(out), Geometry(), 2, &failed);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_EQ(failed, 3u);
  EXPECT_NE(s.message().find("checksum"), std::string::npos) << s;
}

TEST_F(ReadPagesTest, ATruncatedOrMissingPageFileIsDataLoss) {
  const std::string path = absl::StrCat(dir_, "/pages/", HashOf(record_, 2).hex(), ".kvpage");
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 1);
  ExpectDataLossAt(2, "truncated");
  ASSERT_TRUE(std::filesystem::remove(path));
  ExpectDataLossAt(2, "missing");
}

// Drops a file, if there is one, from the page cache (its dirty pages
// written back first).
void DropFromPageCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

class ColdReadPagesTest : public ReadPagesTest {
 protected:
  void SetUp() override {
    ReadPagesTest::SetUp();
    files_.emplace(dir_ + "/pages", rocksdb::FileSystem::Default().get());
    if (!files_->ReadsDirect(HashOf(record_, 0))) GTEST_SKIP() << "this file system has no direct reads";
  }
  size_t FileBytes() const { return EncodedPageBytes(Geometry(), Geometry().page_tokens); }
  // The partial last page's file.
  size_t LastFileBytes() const {
    const int last = record_.page_hashes_size() - 1;
    return EncodedPageBytes(Geometry(), PageTokensAt(Geometry(), record_.kv_length(), last));
  }
  // Drops every page file of the record from the page cache; skips the
  // test where the page cache keeps them anyway (tmpfs).
  void MakeCold() {
    for (int i = 0; i < record_.page_hashes_size(); ++i) {
      DropFromPageCache(files_->PathOf(HashOf(record_, i)));
    }
    if (files_->LikelyCached(HashOf(record_, 0), FileBytes())) GTEST_SKIP() << "the page cache keeps these files";
  }
  std::optional<PageFiles> files_;
};

TEST_F(ColdReadPagesTest, ReadsEveryPageExactlyAndLeavesThePageCacheAsItWas) {
  // With buffers mapped ahead (as kvsessiond does at startup) and, after
  // the first round, the ones the readers kept.
  store_->PrepareDirectReads(Geometry());
  for (int threads : {1, 2, 4}) {
    MakeCold();
    if (IsSkipped()) return;
    std::vector<std::vector<uint8_t>> out;
    const std::vector<SessionStore::PageRead> reads = Reads(out);
    ASSERT_TRUE(store_->ReadPages(reads, Geometry(), threads).ok()) << threads;
    for (int i = 0; i < static_cast<int>(reads.size()) - 1; ++i) {
      EXPECT_EQ(out[i], RamPage(record_, i)) << "page " << i << ", " << threads << " threads";
      // Read past the page cache: the pool holds the page, the cache
      // does not hold it a second time.
      EXPECT_FALSE(files_->LikelyCached(HashOf(record_, i), FileBytes())) << "page " << i;
    }
    // The partial last page (packed: decoded from its file, read past the
    // page cache too) as ReadPage gives it.
    EXPECT_FALSE(files_->LikelyCached(reads.back().hash, LastFileBytes())) << threads << " threads";
    std::vector<uint8_t> last(Geometry().page_bytes(), 0);
    ASSERT_TRUE(store_->ReadPage(reads.back().hash, Geometry(), reads.back().n_tokens, last.data()).ok());
    EXPECT_EQ(out.back(), last);
  }
}

TEST_F(ColdReadPagesTest, ACorruptTruncatedLongerOrMissingPageFileIsDataLossNamingIt) {
  const std::string rotten = files_->PathOf(HashOf(record_, 3));
  FlipPayloadBit(rotten);
  MakeCold();
  if (IsSkipped()) return;
  ExpectDataLossAt(3, "checksum");
  ASSERT_TRUE(std::filesystem::remove(rotten));

  const std::string truncated = files_->PathOf(HashOf(record_, 2));
  std::filesystem::resize_file(truncated, std::filesystem::file_size(truncated) - 1);
  MakeCold();
  if (IsSkipped()) return;
  ExpectDataLossAt(2, "truncated");
  ASSERT_TRUE(std::filesystem::remove(truncated));

  const std::string longer = files_->PathOf(HashOf(record_, 1));
  std::ofstream(longer, std::ios::binary | std::ios::app).put('x');
  MakeCold();
  if (IsSkipped()) return;
  ExpectDataLossAt(1, "longer");
  ASSERT_TRUE(std::filesystem::remove(longer));

  MakeCold();
  if (IsSkipped()) return;
  ExpectDataLossAt(1, "missing");
}


TEST_F(ColdReadPagesTest, APartialPageFileThatIsCorruptTruncatedLongerOrMissingIsDataLossNamingIt) {
  const size_t last = static_cast<size_t>(record_.page_hashes_size() - 1);
  const std::string path = files_->PathOf(HashOf(record_, static_cast<int>(last)));
  const std::string intact = [&] {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }();
  ASSERT_EQ(intact.size(), LastFileBytes());
  auto restore = [&] { std::ofstream(path, std::ios::binary | std::ios::trunc) << intact; };

  FlipPayloadBit(path);
  MakeCold();
  if (IsSkipped()) return;
  ExpectDataLossAt(last, "checksum");

  restore();
  std::filesystem::resize_file(path, intact.size() - 1);
  MakeCold();
  ExpectDataLossAt(last, "truncated");

  restore();
  std::ofstream(path, std::ios::binary | std::ios::app).put('x');
  MakeCold();
  ExpectDataLossAt(last, "longer");

  // Another page's file of the same length in its place: the header the
  // store keeps for the page tells them apart.
  const SessionRecord other = Session("t", 16 * 9 + 5, 5000);
  Put(other);
  std::filesystem::copy_file(files_->PathOf(HashOf(other, static_cast<int>(last))), path,
                             std::filesystem::copy_options::overwrite_existing);
  MakeCold();
  ExpectDataLossAt(last, "header");

  ASSERT_TRUE(std::filesystem::remove(path));
  MakeCold();
  ExpectDataLossAt(last, "missing");

  // Whole again, it reads.
  restore();
  MakeCold();
  std::vector<std::vector<uint8_t>> out;
  ASSERT_TRUE(store_->ReadPages(Reads(out), Geometry(), 2).ok());
  std::vector<uint8_t> expected(Geometry().page_bytes(), 0);
  ASSERT_TRUE(store_->ReadPage(HashOf(record_, static_cast<int>(last)), Geometry(),
                               PageTokensAt(Geometry(), record_.kv_length(), static_cast<int>(last)), expected.data())
                  .ok());
  EXPECT_EQ(out.back(), expected);
}

}  // namespace
}  // namespace kvs
