// SessionStore on a real RocksDB whose file system fails writes on demand
// (cache/fault_injection_fs.h): a failed write changes nothing, reads keep
// working, writes resume by themselves once the disk takes them again, and
// a reopen shows exactly the acknowledged state.
#include <filesystem>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "cache/fault_injection_fs.h"
#include "cache/page_codec.h"
#include "cache/session_store.h"
#include "cache/store_test_records.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/scratch_dir.h"

namespace kvs {
namespace {

using Fault = FaultInjectionFileSystem::Fault;

KvGeometry Geometry() {
  return {.n_layers = 2, .n_kv_heads = 2, .head_dim = 8, .page_tokens = 4, .dtype = KvDtype::kF16};
}

// A session of n_tokens tokens first, first + 1, ..., with KV for all of them.
SessionRecord Session(const std::string& id, int n_tokens, int32_t first) {
  return TestSessionRecord(id, Geometry(), n_tokens, first);
}

PageHash HashOf(const SessionRecord& r, int page) { return PageHashOf(r, page); }

// The page's KV: bytes that follow from its hash.
std::vector<uint8_t> RamPage(const SessionRecord& r, int page) {
  const PageHash h = HashOf(r, page);
  std::vector<uint8_t> bytes(Geometry().page_bytes());
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(h.bytes[i % 16] ^ i);
  return bytes;
}

bool SameRecord(const google::protobuf::Message& a, const google::protobuf::Message& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

class SessionStoreFaultTest : public testing::Test {
 protected:
  void SetUp() override {
    fs_ = std::make_shared<FaultInjectionFileSystem>();
    Open(fs_);
  }
  void TearDown() override { store_.reset(); }

  void Open(std::shared_ptr<rocksdb::FileSystem> fs) {
    store_.reset();
    StoreOptions options;
    options.file_system = std::move(fs);
    absl::StatusOr<std::unique_ptr<SessionStore>> store = SessionStore::Open(dir_, options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    loaded_sessions_.clear();
    std::vector<CheckpointRecord> checkpoints;
    ASSERT_TRUE(store_->LoadAll(&loaded_sessions_, &checkpoints).ok());
  }

  absl::Status Put(const SessionRecord& r, WriteStats* stats = nullptr) {
    return store_->PutSession(
        r,
        [&](int page) {
          return EncodePage(Geometry(), RamPage(r, page).data(),
                            PageTokensAt(Geometry(), r.kv_length(), page));
        },
        stats);
  }

  // Every page of `r` reads back as its RamPage.
  void ExpectReadable(const SessionRecord& r) {
    absl::StatusOr<SessionRecord> got = store_->GetSession(r.id());
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(SameRecord(*got, r));
    const KvGeometry g = Geometry();
    for (int i = 0; i < r.page_hashes_size(); ++i) {
      std::vector<uint8_t> page(g.page_bytes(), 0);
      const int n = PageTokensAt(g, r.kv_length(), i);
      ASSERT_TRUE(store_->ReadPage(HashOf(r, i), g, n, page.data()).ok()) << r.id() << " " << i;
      const std::vector<uint8_t> want = RamPage(r, i);
      EXPECT_TRUE(std::equal(page.begin(), page.begin() + g.slot_offset(n), want.begin()));
    }
  }

  static void ExpectSameStats(const StoreStats& a, const StoreStats& b) {
    EXPECT_EQ(a.pages, b.pages);
    EXPECT_EQ(a.page_bytes, b.page_bytes);
    EXPECT_EQ(a.page_references, b.page_references);
    EXPECT_EQ(a.sessions, b.sessions);
    EXPECT_EQ(a.checkpoints, b.checkpoints);
  }

  ScratchDir scratch_{"session_store_fault_test"};
  const std::string dir_ = scratch_.string();
  std::shared_ptr<FaultInjectionFileSystem> fs_;
  std::unique_ptr<SessionStore> store_;
  std::vector<SessionRecord> loaded_sessions_;
};

TEST_F(SessionStoreFaultTest, ADiskFullPutIsResourceExhaustedAndChangesNothing) {
  const SessionRecord a = Session("a", 12, 100);
  ASSERT_TRUE(Put(a).ok());
  const StoreStats before = store_->Stats();

  fs_->FailWrites(Fault::kNoSpace);
  const SessionRecord b = Session("b", 10, 500);
  const absl::Status s = Put(b);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  const SessionRecord a_grown = Session("a", 20, 100);
  EXPECT_TRUE(absl::IsResourceExhausted(Put(a_grown)));
  EXPECT_TRUE(absl::IsResourceExhausted(store_->DeleteSession("a")));
  EXPECT_GT(fs_->failures(), 0);

  ExpectSameStats(store_->Stats(), before);
  EXPECT_TRUE(absl::IsNotFound(store_->GetSession("b").status()));
  for (int i = 0; i < b.page_hashes_size(); ++i) {
    EXPECT_FALSE(store_->HasPage(HashOf(b, i)));
    EXPECT_TRUE(absl::IsNotFound(store_->GetPage(HashOf(b, i)).status()));
  }
  EXPECT_FALSE(store_->HasPage(HashOf(a_grown, 4)));
  ExpectReadable(a);  // reads work while writes fail
}

TEST_F(SessionStoreFaultTest, AnIoErrorPutIsInternalOrUnavailableAndChangesNothing) {
  const SessionRecord a = Session("a", 12, 100);
  ASSERT_TRUE(Put(a).ok());
  const StoreStats before = store_->Stats();
  fs_->FailWrites(Fault::kIoError);
  const absl::Status s = Put(Session("b", 10, 500));
  EXPECT_TRUE(absl::IsInternal(s) || absl::IsUnavailable(s)) << s;
  ExpectSameStats(store_->Stats(), before);
  EXPECT_TRUE(absl::IsNotFound(store_->GetSession("b").status()));
  ExpectReadable(a);
}

TEST_F(SessionStoreFaultTest, WritesResumeAfterHealWithoutReopening) {
  for (Fault fault : {Fault::kNoSpace, Fault::kIoError}) {
    SCOPED_TRACE(fault == Fault::kNoSpace ? "no space" : "I/O error");
    const std::string id = fault == Fault::kNoSpace ? "nospace" : "ioerror";
    fs_->FailWrites(fault);
    EXPECT_FALSE(Put(Session(id, 10, 700)).ok());
    EXPECT_FALSE(Put(Session(id, 10, 700)).ok());  // still failing: still refused
    fs_->Heal();
    const SessionRecord r = Session(id, 10, 700);
    WriteStats stats;
    const absl::Status s = Put(r, &stats);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(stats.pages_written, 3);
    ExpectReadable(r);
    ASSERT_TRUE(store_->DeleteSession(id).ok());
    EXPECT_EQ(store_->Stats().pages, 0);
  }
}

// A put whose log write reached the file but whose sync failed is
// refused, yet may be in the store once it is reopened. A delete of its id
// then goes by what the reopened store holds: the record is deleted, and
// does not come back after a restart.
TEST_F(SessionStoreFaultTest, ADeleteAfterAPutWhoseSyncFailedDeletesWhatThatPutLeftInTheLog) {
  const SessionRecord a = Session("a", 12, 100);
  ASSERT_TRUE(Put(a).ok());
  fs_->FailWrites(Fault::kSyncError);
  // The same tokens as `a`: no new page file, only the record's log write.
  const absl::Status put = Put(Session("x", 12, 100));
  ASSERT_FALSE(put.ok()) << "the sync was to fail";
  fs_->Heal();
  const absl::Status deleted = store_->DeleteSession("x");
  EXPECT_TRUE(deleted.ok() || absl::IsNotFound(deleted)) << deleted;

  Open(fs_);  // a restart
  std::vector<std::string> ids;
  for (const SessionRecord& r : loaded_sessions_) ids.push_back(r.id());
  EXPECT_EQ(ids, std::vector<std::string>{"a"}) << "a deleted session came back after the restart";
  ExpectReadable(a);
}

// A write whose sync failed leaves RocksDB unable to resume, so the next
// mutation reopens the store. A reopen that cannot read the store's files
// fails that mutation and leaves reads UNAVAILABLE; the mutation after it
// reopens again, and the store then holds what was acknowledged (and may
// hold `x`, whose log record reached the file: the caveat of every
// log-based store).
TEST_F(SessionStoreFaultTest, AReopenThatCannotReadTheStoreFailsUntilAMutationReopensIt) {
  const SessionRecord a = Session("a", 12, 100);
  ASSERT_TRUE(Put(a).ok());
  Open(fs_);  // a restart: `a` now lives in table files, which a reopen reads
  const StoreStats before = store_->Stats();

  fs_->FailWrites(Fault::kSyncError);
  ASSERT_FALSE(Put(Session("x", 12, 100)).ok()) << "the sync was to fail";
  fs_->Heal();
  fs_->FailReadsOf(".sst");
  const SessionRecord b = Session("b", 10, 500);
  const absl::Status refused = Put(b);
  EXPECT_TRUE(absl::IsInternal(refused) || absl::IsUnavailable(refused)) << refused;
  EXPECT_TRUE(absl::IsUnavailable(store_->GetSession("a").status()));
  EXPECT_TRUE(absl::IsUnavailable(store_->GetSession("b").status()));
  ExpectSameStats(store_->Stats(), before);

  fs_->FailReadsOf("");
  const absl::Status put = Put(b);
  ASSERT_TRUE(put.ok()) << put;
  ExpectReadable(a);
  ExpectReadable(b);
  EXPECT_EQ(store_->Stats().pages, before.pages + b.page_hashes_size());

  Open(fs_);  // and after a restart
  ExpectReadable(a);
  ExpectReadable(b);
}

// The fault of the test below: a disk that fills up after 64 KiB more, or
// one that starts failing every write at step 30.
class SessionStoreFaultSequenceTest : public SessionStoreFaultTest,
                                      public testing::WithParamInterface<Fault> {};

TEST_P(SessionStoreFaultSequenceTest, AFaultMidSequenceKeepsExactlyTheAcknowledgedWrites) {
  // Sessions grow and get replaced and deleted while the disk fails;
  // `acked` follows only the writes that returned OK.
  const Fault fault = GetParam();
  std::map<std::string, SessionRecord> acked;
  if (fault == Fault::kNoSpace) fs_->SetSpaceLimit(64 << 10);
  int failed = 0;
  int ok_after_heal = 0;
  for (int step = 0; step < 120; ++step) {
    if (fault == Fault::kIoError && step == 30) fs_->FailWrites(Fault::kIoError);
    const std::string id = absl::StrCat("s", step % 7);
    absl::Status s;
    if (step % 11 == 10) {
      s = store_->DeleteSession(id);
      if (s.ok()) acked.erase(id);
      if (absl::IsNotFound(s)) s = absl::OkStatus();
    } else {
      const SessionRecord r = Session(id, 4 + step, 1000 * (step % 7));
      s = Put(r);
      if (s.ok()) acked[id] = r;
    }
    if (!s.ok()) {
      if (fault == Fault::kNoSpace) {
        EXPECT_TRUE(absl::IsResourceExhausted(s)) << step << ": " << s;
      } else {
        EXPECT_TRUE(absl::IsInternal(s) || absl::IsUnavailable(s)) << step << ": " << s;
      }
      EXPECT_LT(failed, 5) << "a write failed after the disk came back: " << s;
      if (++failed == 5) fs_->Heal();  // the disk comes back
    } else if (failed >= 5) {
      ++ok_after_heal;
    }
  }
  EXPECT_EQ(failed, 5);
  EXPECT_GT(ok_after_heal, 10);
  ASSERT_FALSE(acked.empty());

  // The state now and after a reopen (the default file system): exactly
  // the acknowledged records, every page readable, nothing orphaned.
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "before reopen" : "after reopen");
    if (round == 1) Open(nullptr);
    EXPECT_EQ(store_->Stats().sessions, static_cast<int64_t>(acked.size()));
    for (const auto& [id, r] : acked) ExpectReadable(r);
    if (round == 1) {
      EXPECT_EQ(loaded_sessions_.size(), acked.size());
    }
    // One page file per stored page; before the reopen, a batch whose
    // outcome was uncertain may have left files that the reopen collects.
    int64_t page_files = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_ + "/pages")) {
      page_files += e.path().extension() == ".kvpage";
    }
    if (round == 0) {
      EXPECT_GE(page_files, store_->Stats().pages);
    } else {
      EXPECT_EQ(page_files, store_->Stats().pages);
    }
    absl::StatusOr<VerifyReport> report = store_->Verify();
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_TRUE(report->ok()) << report->missing_pages.size() << " missing, "
                              << report->orphan_pages.size() << " orphans, "
                              << report->corrupt_pages.size() << " corrupt";
  }
}

INSTANTIATE_TEST_SUITE_P(Faults, SessionStoreFaultSequenceTest,
                         testing::Values(Fault::kNoSpace, Fault::kIoError),
                         [](const testing::TestParamInfo<Fault>& info) {
                           return info.param == Fault::kNoSpace ? "DiskFull" : "IoError";
                         });

}  // namespace
}  // namespace kvs
