// Corruption: the test closes the store, damages one stored value through
// RocksDB directly or one page file (as bit rot or a bad writer would),
// reopens, and checks
// that the damage is reported as DATA_LOSS where it is and nowhere else.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "absl/strings/str_cat.h"
#include "cache/page_codec.h"
#include "cache/session_store.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "tests/scratch_dir.h"

namespace kvs {
namespace {

KvGeometry Geometry() {
  return {.n_layers = 1, .n_kv_heads = 2, .head_dim = 16, .page_tokens = 4, .dtype = KvDtype::kF16};
}

// The store's RocksDB opened directly, with the store's column families.
class RawDb {
 public:
  enum Family { kMeta, kSessions, kCheckpoints, kPages };

  explicit RawDb(const std::string& dir) {
    std::vector<rocksdb::ColumnFamilyDescriptor> families;
    for (const char* name : {SessionStore::kMetaFamily, SessionStore::kSessionsFamily,
                             SessionStore::kCheckpointsFamily, SessionStore::kPagesFamily}) {
      families.emplace_back(name, rocksdb::ColumnFamilyOptions());
    }
    rocksdb::DB* db = nullptr;
    const rocksdb::Status s = rocksdb::DB::Open(rocksdb::DBOptions(), dir, families, &handles_, &db);
    EXPECT_TRUE(s.ok()) << s.ToString();
    db_.reset(db);
  }
  ~RawDb() {
    for (rocksdb::ColumnFamilyHandle* h : handles_) db_->DestroyColumnFamilyHandle(h);
  }

  std::string Get(Family f, std::string_view key) {
    std::string value;
    EXPECT_TRUE(db_->Get(rocksdb::ReadOptions(), handles_[f], key, &value).ok()) << key;
    return value;
  }
  void Put(Family f, std::string_view key, std::string_view value) {
    ASSERT_TRUE(db_->Put(rocksdb::WriteOptions(), handles_[f], key, value).ok());
  }
  void Delete(Family f, std::string_view key) {
    ASSERT_TRUE(db_->Delete(rocksdb::WriteOptions(), handles_[f], key).ok());
  }
  // Flips the bits of `mask` in byte `at` of the value.
  void FlipByte(Family f, std::string_view key, size_t at, uint8_t mask = 0x20) {
    std::string value = Get(f, key);
    ASSERT_LT(at, value.size());
    value[at] = static_cast<char>(value[at] ^ mask);
    Put(f, key, value);
  }

 private:
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

class CorruptionTest : public testing::Test {
 protected:
  // Three sessions a, b, c with no page in common, and a checkpoint of c.
  void SetUp() override {
    Reopen();
    for (const char* id : {"a", "b", "c"}) {
      SessionRecord r;
      r.set_id(id);
      r.set_model_fingerprint("model-c");
      *r.mutable_geometry() = ToGeometryRecord(Geometry());
      for (int i = 0; i < 10; ++i) r.add_tokens(id[0] * 1000 + i);
      r.set_kv_length(9);
      ASSERT_TRUE(FillPageHashes(&r).ok());
      ASSERT_TRUE(store_->PutSession(r, [&](int page) {
        const std::vector<uint8_t> ram(Geometry().page_bytes(), static_cast<uint8_t>(page + id[0]));
        return EncodePage(Geometry(), ram.data(), PageTokensAt(Geometry(), 9, page));
      }).ok());
      records_[id] = r;
    }
    CheckpointRecord cp;
    cp.set_id("cp");
    *cp.mutable_session() = records_["c"];
    ASSERT_TRUE(store_->PutCheckpoint(cp).ok());
    store_.reset();
  }
  void TearDown() override { store_.reset(); }

  // Opens and loads the store; corrupt_ is what LoadAll found unreadable.
  void Reopen() {
    store_.reset();
    store_ = SessionStore::Open(dir_, {}).value();
    ASSERT_TRUE(store_->LoadAll(&sessions_, &checkpoints_, &corrupt_).ok());
  }

  // Opens the store as on a full disk (a free-space floor no disk meets):
  // read-only until a mutation that frees space reopens it for writing.
  absl::StatusOr<std::unique_ptr<SessionStore>> OpenOnAFullDisk() {
    store_.reset();
    StoreOptions options;
    options.min_free_bytes = int64_t{1} << 62;
    return SessionStore::Open(dir_, options);
  }
  // Makes the store what a format-1 build left: pages whole in the pages
  // family, no page files, no pages/ directory.
  void MakeFormatOne() {
    for (const auto& [id, r] : records_) {
      for (int i = 0; i < r.page_hashes_size(); ++i) {
        const PageHash hash = Page(id, i);
        if (!std::filesystem::exists(PageFile(hash))) continue;  // shared, moved already
        RawDb(dir_).Put(RawDb::kPages, hash.view(), ReadWholeFile(PageFile(hash)));
        ASSERT_TRUE(std::filesystem::remove(PageFile(hash)));
      }
    }
    RawDb(dir_).Put(RawDb::kMeta, SessionStore::kFormatVersionKey, "1");
  }

  PageHash Page(const std::string& id, int i) {
    return *PageHash::FromBytes(records_[id].page_hashes(i));
  }
  absl::Status ReadPage(const std::string& id, int i) {
    std::vector<uint8_t> ram(Geometry().page_bytes());
    return store_->ReadPage(Page(id, i), Geometry(), PageTokensAt(Geometry(), 9, i), ram.data());
  }
  std::string PageFile(const PageHash& hash) const {
    return absl::StrCat(dir_, "/pages/", hash.hex(), ".kvpage");
  }
  static std::string ReadWholeFile(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  // Flips a bit of byte `at` of the page's file, or of its entry in the
  // pages family (its header).
  void Damage_(bool in_file, const PageHash& hash, size_t at) {
    if (!in_file) {
      RawDb(dir_).FlipByte(RawDb::kPages, hash.view(), at);
      return;
    }
    std::string bytes = ReadWholeFile(PageFile(hash));
    ASSERT_LT(at, bytes.size());
    bytes[at] = static_cast<char>(bytes[at] ^ 0x20);
    std::ofstream(PageFile(hash), std::ios::binary | std::ios::trunc) << bytes;
  }
  // Every page but (bad_id, bad_page) reads back.
  void ExpectOtherPagesFine(const std::string& bad_id, int bad_page) {
    for (const auto& [id, r] : records_) {
      for (int i = 0; i < r.page_hashes_size(); ++i) {
        if (id == bad_id && i == bad_page) continue;
        EXPECT_TRUE(ReadPage(id, i).ok()) << id << " " << i;
      }
    }
  }

  ScratchDir scratch_{"corruption_test"};
  const std::string dir_ = scratch_.string();
  std::unique_ptr<SessionStore> store_;
  std::map<std::string, SessionRecord> records_;
  std::vector<SessionRecord> sessions_;
  std::vector<CheckpointRecord> checkpoints_;
  std::vector<CorruptEntry> corrupt_;
};

TEST_F(CorruptionTest, DamagedPageIsDataLossForThatPageOnly) {
  // The header kept in the page's entry (its magic, its n_tokens), and the
  // page file (its magic, a payload byte).
  struct Damage {
    bool in_file;
    size_t at;
  };
  for (const Damage d : {Damage{false, 2}, Damage{false, 29}, Damage{true, 2},
                         Damage{true, kPageHeaderBytes + 70}}) {
    SCOPED_TRACE(absl::StrCat(d.in_file ? "file" : "entry", " byte ", d.at));
    Damage_(d.in_file, Page("b", 1), d.at);
    Reopen();
    EXPECT_TRUE(corrupt_.empty());  // records are fine
    EXPECT_EQ(sessions_.size(), 3u);

    absl::StatusOr<std::string> encoded = store_->GetPage(Page("b", 1));
    if (encoded.ok()) {
      std::vector<uint8_t> ram(Geometry().page_bytes());
      int n_tokens = 0;
      EXPECT_TRUE(absl::IsDataLoss(DecodePage(Geometry(), *encoded, ram.data(), &n_tokens)));
    } else {
      EXPECT_TRUE(absl::IsDataLoss(encoded.status())) << encoded.status();
    }
    const absl::Status s = ReadPage("b", 1);
    EXPECT_TRUE(absl::IsDataLoss(s)) << s;
    EXPECT_NE(s.message().find(Page("b", 1).hex()), std::string::npos) << s;
    ExpectOtherPagesFine("b", 1);

    absl::StatusOr<VerifyReport> report = store_->Verify();
    ASSERT_TRUE(report.ok());
    ASSERT_EQ(report->corrupt_pages.size(), 1u);
    EXPECT_EQ(report->corrupt_pages[0].key, Page("b", 1).view());
    EXPECT_TRUE(report->missing_pages.empty());
    EXPECT_TRUE(report->orphan_pages.empty());
    store_.reset();
    Damage_(d.in_file, Page("b", 1), d.at);  // repair for the next round
  }
}

TEST_F(CorruptionTest, MissingPageFileIsDataLoss) {
  ASSERT_TRUE(std::filesystem::remove(PageFile(Page("c", 0))));
  Reopen();
  const absl::Status s = ReadPage("c", 0);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("missing"), std::string::npos) << s;
  ExpectOtherPagesFine("c", 0);
  absl::StatusOr<VerifyReport> report = store_->Verify();
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->corrupt_pages.size(), 1u);
  EXPECT_EQ(report->corrupt_pages[0].key, Page("c", 0).view());
}

TEST_F(CorruptionTest, AFormatOneStoreIsReadAndMarkedFormatTwo) {
  MakeFormatOne();
  Reopen();
  EXPECT_EQ(*store_->GetMeta(SessionStore::kFormatVersionKey), "2");
  ExpectOtherPagesFine("", -1);
  // ReadPages too (the restore path), into fresh destinations.
  std::vector<std::vector<uint8_t>> out(3, std::vector<uint8_t>(Geometry().page_bytes(), 0));
  std::vector<SessionStore::PageRead> reads;
  for (int i = 0; i < 3; ++i) reads.push_back({Page("a", i), PageTokensAt(Geometry(), 9, i), out[i].data()});
  ASSERT_TRUE(store_->ReadPages(reads, Geometry(), 2).ok());
  EXPECT_EQ(out[0], std::vector<uint8_t>(Geometry().page_bytes(), static_cast<uint8_t>(0 + 'a')));
  EXPECT_TRUE(store_->Verify()->ok());
  // Deleting a session deletes its whole-page entries like any others.
  ASSERT_TRUE(store_->DeleteSession("a").ok());
  EXPECT_TRUE(absl::IsNotFound(store_->GetPage(Page("a", 0)).status()));
  for (const char* id : {"b", "c"}) {
    for (int i = 0; i < records_[id].page_hashes_size(); ++i) EXPECT_TRUE(ReadPage(id, i).ok()) << id << i;
  }
}

// A full disk opens the store read-only; the version is still checked
// then, and marked when the first write reopens it, as at a writable open.
TEST_F(CorruptionTest, AFormatOneStoreOpenedOnAFullDiskIsMarkedFormatTwoWhenAWriteReopensIt) {
  MakeFormatOne();
  std::filesystem::remove_all(std::filesystem::path(dir_) / "pages");
  absl::StatusOr<std::unique_ptr<SessionStore>> store = OpenOnAFullDisk();
  ASSERT_TRUE(store.ok()) << store.status();
  store_ = *std::move(store);
  ASSERT_TRUE(store_->LoadAll(&sessions_, &checkpoints_, &corrupt_).ok());
  EXPECT_EQ(*store_->GetMeta(SessionStore::kFormatVersionKey), "1");  // read-only: nothing written
  ExpectOtherPagesFine("", -1);
  // A delete frees space, so it runs: the store reopens for writing.
  ASSERT_TRUE(store_->DeleteSession("a").ok());
  EXPECT_EQ(*store_->GetMeta(SessionStore::kFormatVersionKey), "2");
  EXPECT_TRUE(std::filesystem::is_directory(std::filesystem::path(dir_) / "pages"));
  for (const char* id : {"b", "c"}) {
    for (int i = 0; i < records_[id].page_hashes_size(); ++i) EXPECT_TRUE(ReadPage(id, i).ok()) << id << i;
  }
  EXPECT_TRUE(store_->Verify()->ok());
}

TEST_F(CorruptionTest, AStoreOfANewerFormatIsRefusedAlsoWhenAFullDiskOpensItReadOnly) {
  RawDb(dir_).Put(RawDb::kMeta, SessionStore::kFormatVersionKey, absl::StrCat(SessionStore::kFormatVersion + 1));
  absl::StatusOr<std::unique_ptr<SessionStore>> store = OpenOnAFullDisk();
  EXPECT_TRUE(absl::IsFailedPrecondition(store.status())) << store.status();
  store = SessionStore::Open(dir_, {});
  EXPECT_TRUE(absl::IsFailedPrecondition(store.status())) << store.status();
}

TEST_F(CorruptionTest, MissingPageIsDataLoss) {
  RawDb(dir_).Delete(RawDb::kPages, Page("a", 2).view());
  Reopen();
  EXPECT_TRUE(corrupt_.empty());
  const absl::Status s = ReadPage("a", 2);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("missing"), std::string::npos) << s;
  ExpectOtherPagesFine("a", 2);
  absl::StatusOr<VerifyReport> report = store_->Verify();
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->missing_pages, std::vector<PageHash>{Page("a", 2)});
}

TEST_F(CorruptionTest, DamagedSessionRecordIsReportedAndOthersLoad) {
  const size_t size = RawDb(dir_).Get(RawDb::kSessions, "b").size();
  for (size_t at : {size_t{0}, size_t{5}, size / 2, size - 1}) {  // checksum, id, middle, end
    SCOPED_TRACE(at);
    RawDb(dir_).FlipByte(RawDb::kSessions, "b", at);
    Reopen();
    ASSERT_EQ(corrupt_.size(), 1u);
    EXPECT_EQ(corrupt_[0].kind, CorruptEntry::Kind::kSession);
    EXPECT_EQ(corrupt_[0].key, "b");
    EXPECT_TRUE(absl::IsDataLoss(corrupt_[0].status)) << corrupt_[0].status;
    ASSERT_EQ(sessions_.size(), 2u);
    EXPECT_EQ(checkpoints_.size(), 1u);
    EXPECT_TRUE(absl::IsDataLoss(store_->GetSession("b").status()));
    EXPECT_TRUE(store_->GetSession("a").ok());
    EXPECT_EQ(store_->Stats().corrupt_records, 1);
    ExpectOtherPagesFine("", -1);  // b's pages are still on disk
    store_.reset();
    RawDb(dir_).FlipByte(RawDb::kSessions, "b", at);
  }
}

TEST_F(CorruptionTest, UnreadableRecordCanBeReplacedOrDeleted) {
  RawDb(dir_).Put(RawDb::kSessions, "b", "");
  RawDb(dir_).FlipByte(RawDb::kCheckpoints, "cp", 9);
  Reopen();
  ASSERT_EQ(corrupt_.size(), 2u);
  EXPECT_EQ(corrupt_[1].kind, CorruptEntry::Kind::kCheckpoint);
  EXPECT_TRUE(absl::IsDataLoss(store_->GetCheckpoint("cp").status()));
  // Pages of unreadable records are no longer referenced: Verify says so
  // rather than collecting them.
  absl::StatusOr<VerifyReport> report = store_->Verify();
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->orphan_pages.size(), 3u);  // b's; c still holds the checkpoint's
  ASSERT_TRUE(store_->DeleteSession("b").ok());
  ASSERT_TRUE(store_->DeleteCheckpoint("cp").ok());
  EXPECT_EQ(store_->Stats().corrupt_records, 0);
  Reopen();
  EXPECT_TRUE(corrupt_.empty());
}

TEST_F(CorruptionTest, RecordUnderAnotherKeyIsDataLoss) {
  {
    RawDb raw(dir_);
    raw.Put(RawDb::kSessions, "z", raw.Get(RawDb::kSessions, "a"));
  }
  Reopen();
  ASSERT_EQ(corrupt_.size(), 1u);
  EXPECT_EQ(corrupt_[0].key, "z");
  EXPECT_NE(corrupt_[0].status.message().find("stored under"), std::string::npos);
  // z lists a's pages: they stay counted, so deleting a keeps them.
  ASSERT_TRUE(store_->DeleteSession("a").ok());
  EXPECT_TRUE(ReadPage("a", 0).ok());
}

TEST_F(CorruptionTest, AHugeKeyIsQuotedAsAShortPrefixWithItsSize) {
  const std::string huge_key(100000, 'z');
  {
    RawDb raw(dir_);
    raw.Put(RawDb::kSessions, huge_key, raw.Get(RawDb::kSessions, "a"));
  }
  Reopen();
  ASSERT_EQ(corrupt_.size(), 1u);
  EXPECT_EQ(corrupt_[0].key, huge_key);
  const std::string message(corrupt_[0].status.message());
  EXPECT_TRUE(absl::IsDataLoss(corrupt_[0].status));
  EXPECT_LT(message.size(), 300u) << message.substr(0, 300);
  EXPECT_NE(message.find("stored under 'zzz"), std::string::npos) << message.substr(0, 300);
  EXPECT_NE(message.find("(100000 bytes)"), std::string::npos) << message.substr(0, 300);
}

TEST_F(CorruptionTest, AHugeFormatVersionIsDataLossWithAShortMessage) {
  store_.reset();
  std::string huge_version(100001, '9');
  huge_version.back() = 'x';
  RawDb(dir_).Put(RawDb::kMeta, SessionStore::kFormatVersionKey, huge_version);
  const absl::Status s = SessionStore::Open(dir_, {}).status();
  EXPECT_TRUE(absl::IsDataLoss(s)) << s.message().substr(0, 300);
  EXPECT_LT(s.message().size(), 300u) << s.message().substr(0, 300);
  EXPECT_NE(s.message().find("(100001 bytes)"), std::string::npos) << s.message().substr(0, 300);
}

TEST_F(CorruptionTest, FormatVersionIsChecked) {
  RawDb(dir_).Put(RawDb::kMeta, SessionStore::kFormatVersionKey, "3");
  EXPECT_TRUE(absl::IsFailedPrecondition(SessionStore::Open(dir_, {}).status()));
  RawDb(dir_).Put(RawDb::kMeta, SessionStore::kFormatVersionKey, "0");
  EXPECT_TRUE(absl::IsFailedPrecondition(SessionStore::Open(dir_, {}).status()));
  RawDb(dir_).Put(RawDb::kMeta, SessionStore::kFormatVersionKey, "two");
  EXPECT_TRUE(absl::IsDataLoss(SessionStore::Open(dir_, {}).status()));
  RawDb(dir_).Delete(RawDb::kMeta, SessionStore::kFormatVersionKey);
  EXPECT_TRUE(absl::IsDataLoss(SessionStore::Open(dir_, {}).status()));
}

}  // namespace
}  // namespace kvs
