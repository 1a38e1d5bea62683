// SessionStore over a real RocksDB in a temporary directory: records,
// page dedup, reference counting and garbage collection, checkpoints,
// atomic multi-record writes.
#include "cache/session_store.h"

#include <filesystem>
#include <numeric>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "cache/page_codec.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/scratch_dir.h"

namespace kvs {
namespace {

KvGeometry Geometry() {
  return {.n_layers = 2, .n_kv_heads = 2, .head_dim = 8, .page_tokens = 4, .dtype = KvDtype::kF16};
}

// n tokens first, first + 1, ...
std::vector<int32_t> Tokens(int n, int32_t first) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// A session of `tokens` whose KV covers all but the last token, as the
// engine keeps it.
SessionRecord Session(const std::string& id, const std::vector<int32_t>& tokens) {
  SessionRecord r;
  r.set_id(id);
  r.set_model_fingerprint("model-a");
  *r.mutable_geometry() = ToGeometryRecord(Geometry());
  for (int32_t t : tokens) r.add_tokens(t);
  r.set_kv_length(std::max(0, static_cast<int>(tokens.size()) - 1));
  (*r.mutable_labels())["user"] = "test";
  EXPECT_TRUE(FillPageHashes(&r).ok());
  return r;
}

PageHash HashOf(const SessionRecord& r, int page) {
  return *PageHash::FromBytes(r.page_hashes(page));
}

// The RAM page of page `page` of `r`: its bytes follow from its hash, as
// real KV follows from the tokens.
std::vector<uint8_t> RamPage(const SessionRecord& r, int page) {
  const PageHash h = HashOf(r, page);
  std::vector<uint8_t> bytes(Geometry().page_bytes());
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(h.bytes[i % 16] + i);
  return bytes;
}

// encode_missing for the tests: encodes RamPage and remembers what it was
// asked for.
struct Encoder {
  absl::StatusOr<std::string> operator()(const SessionRecord& r, int page) {
    requested.push_back(HashOf(r, page));
    return EncodePage(Geometry(), RamPage(r, page).data(),
                      PageTokensAt(Geometry(), r.kv_length(), page));
  }
  std::vector<PageHash> requested;
};

bool SameRecord(const google::protobuf::Message& a, const google::protobuf::Message& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

class SessionStoreTest : public testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<SessionStore>> store = SessionStore::Open(dir_, {});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    std::vector<SessionRecord> sessions;
    std::vector<CheckpointRecord> checkpoints;
    ASSERT_TRUE(store_->LoadAll(&sessions, &checkpoints).ok());
  }
  void TearDown() override { store_.reset(); }

  absl::Status Put(const SessionRecord& r, WriteStats* stats = nullptr) {
    return store_->PutSession(r, [&](int page) { return encoder_(r, page); }, stats);
  }

  // Every page of `r` reads back as what was encoded.
  void ExpectPagesReadable(const SessionRecord& r) {
    const KvGeometry g = Geometry();
    for (int i = 0; i < r.page_hashes_size(); ++i) {
      std::vector<uint8_t> page(g.page_bytes(), 0);
      const int n = PageTokensAt(g, r.kv_length(), i);
      ASSERT_TRUE(store_->ReadPage(HashOf(r, i), g, n, page.data()).ok()) << r.id() << " " << i;
      const std::vector<uint8_t> want = RamPage(r, i);
      const size_t slots = g.slot_offset(n);  // first block: (layer 0, key, head 0)
      EXPECT_TRUE(std::equal(page.begin(), page.begin() + slots, want.begin()));
    }
  }

  ScratchDir scratch_{"session_store_test"};
  const std::string dir_ = scratch_.string();
  std::unique_ptr<SessionStore> store_;
  Encoder encoder_;
};

TEST_F(SessionStoreTest, PutThenGetSession) {
  const SessionRecord a = Session("a", Tokens(11, 100));  // kv 10: pages of 4, 4, 2
  WriteStats stats;
  ASSERT_TRUE(Put(a, &stats).ok());
  EXPECT_EQ(stats.pages_written, 3);
  EXPECT_EQ(stats.pages_reused, 0);
  EXPECT_EQ(stats.bytes_written, static_cast<int64_t>(2 * EncodedPageBytes(Geometry(), 4) +
                                                      EncodedPageBytes(Geometry(), 2)) +
                                     static_cast<int64_t>(a.ByteSizeLong()) + 4);

  absl::StatusOr<SessionRecord> got = store_->GetSession("a");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(SameRecord(*got, a));
  EXPECT_TRUE(absl::IsNotFound(store_->GetSession("b").status()));
  ExpectPagesReadable(a);

  const StoreStats s = store_->Stats();
  EXPECT_EQ(s.sessions, 1);
  EXPECT_EQ(s.pages, 3);
  EXPECT_EQ(s.page_references, 3);
  EXPECT_EQ(s.page_bytes, stats.bytes_written - static_cast<int64_t>(a.ByteSizeLong()) - 4);
}

TEST_F(SessionStoreTest, SharedPagesAreStoredAndEncodedOnce) {
  std::vector<int32_t> tb = Tokens(41, 100);
  for (int i = 24; i < 41; ++i) tb[i] = 5;  // same first 6 pages
  const SessionRecord a = Session("a", Tokens(41, 100)), b = Session("b", tb);
  ASSERT_TRUE(Put(a).ok());
  encoder_.requested.clear();
  WriteStats stats;
  ASSERT_TRUE(Put(b, &stats).ok());
  EXPECT_EQ(stats.pages_written, 4);
  EXPECT_EQ(stats.pages_reused, 6);
  EXPECT_EQ(encoder_.requested, (std::vector<PageHash>{HashOf(b, 6), HashOf(b, 7), HashOf(b, 8),
                                                       HashOf(b, 9)}));
  const StoreStats s = store_->Stats();
  EXPECT_EQ(s.pages, 14);
  EXPECT_EQ(s.page_references, 20);
  ExpectPagesReadable(a);
  ExpectPagesReadable(b);

  // Writing the same record again writes no page.
  encoder_.requested.clear();
  ASSERT_TRUE(Put(b, &stats).ok());
  EXPECT_EQ(stats.pages_written, 0);
  EXPECT_TRUE(encoder_.requested.empty());
  EXPECT_EQ(store_->Stats().page_references, 20);
}

TEST_F(SessionStoreTest, ReplacingARecordCollectsPagesItNoLongerReferences) {
  const SessionRecord a10 = Session("a", Tokens(11, 100));  // pages 0, 1 full, 2 partial
  const SessionRecord b10 = Session("b", Tokens(11, 100));  // the same pages
  ASSERT_TRUE(Put(a10).ok());
  ASSERT_TRUE(Put(b10).ok());
  const SessionRecord a14 = Session("a", Tokens(15, 100));  // page 2 now full, 3 partial
  WriteStats stats;
  ASSERT_TRUE(Put(a14, &stats).ok());
  EXPECT_EQ(stats.pages_written, 2);
  EXPECT_EQ(stats.pages_deleted, 0);  // b still holds the partial page 2
  EXPECT_TRUE(store_->HasPage(HashOf(a10, 2)));

  const SessionRecord b5 = Session("b", Tokens(6, 100));  // truncated to pages 0, 1 (partial)
  ASSERT_TRUE(Put(b5, &stats).ok());
  EXPECT_EQ(stats.pages_written, 1);
  EXPECT_EQ(stats.pages_deleted, 1);
  EXPECT_FALSE(store_->HasPage(HashOf(a10, 2)));
  EXPECT_TRUE(absl::IsNotFound(store_->GetPage(HashOf(a10, 2)).status()));
  EXPECT_TRUE(absl::IsDataLoss(
      store_->ReadPage(HashOf(a10, 2), Geometry(), 2, RamPage(a10, 2).data())));
  EXPECT_EQ(store_->Stats().pages, 5);  // a: 0 1 2 3, b: 1 (partial)
  ExpectPagesReadable(a14);
  ExpectPagesReadable(b5);
}

TEST_F(SessionStoreTest, DeleteSessionCollectsOnlyItsOwnPages) {
  std::vector<int32_t> tb = Tokens(13, 100);
  tb[9] = 1;  // shares pages 0, 1
  const SessionRecord a = Session("a", Tokens(13, 100)), b = Session("b", tb);
  ASSERT_TRUE(Put(a).ok());
  ASSERT_TRUE(Put(b).ok());
  WriteStats stats;
  ASSERT_TRUE(store_->DeleteSession("a", &stats).ok());
  EXPECT_EQ(stats.pages_deleted, 1);
  EXPECT_FALSE(store_->HasPage(HashOf(a, 2)));
  EXPECT_TRUE(absl::IsNotFound(store_->GetSession("a").status()));
  EXPECT_TRUE(absl::IsNotFound(store_->DeleteSession("a")));
  ExpectPagesReadable(b);
  ASSERT_TRUE(store_->DeleteSession("b").ok());
  EXPECT_EQ(store_->Stats().pages, 0);
  EXPECT_EQ(store_->Stats().page_bytes, 0);
  EXPECT_EQ(store_->Verify()->pages_checked, 0);  // nothing left on disk
}

TEST_F(SessionStoreTest, CheckpointsKeepPagesAlive) {
  const SessionRecord a = Session("a", Tokens(10, 100));
  ASSERT_TRUE(Put(a).ok());
  CheckpointRecord cp;
  cp.set_id("cp1");
  cp.set_name("before the edit");
  *cp.mutable_session() = a;
  WriteStats stats;
  ASSERT_TRUE(store_->PutCheckpoint(cp, &stats).ok());
  EXPECT_EQ(stats.pages_written, 0);
  EXPECT_EQ(stats.pages_reused, 3);
  EXPECT_EQ(store_->Stats().page_references, 6);

  ASSERT_TRUE(store_->DeleteSession("a").ok());
  ExpectPagesReadable(a);
  absl::StatusOr<CheckpointRecord> got = store_->GetCheckpoint("cp1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(SameRecord(*got, cp));

  ASSERT_TRUE(store_->DeleteCheckpoint("cp1", &stats).ok());
  EXPECT_EQ(stats.pages_deleted, 3);
  EXPECT_EQ(store_->Stats().pages, 0);
  EXPECT_TRUE(absl::IsNotFound(store_->DeleteCheckpoint("cp1")));
}

TEST_F(SessionStoreTest, CheckpointOfPagesNotHeldIsRefused) {
  CheckpointRecord cp;
  cp.set_id("cp");
  *cp.mutable_session() = Session("a", Tokens(10, 100));
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->PutCheckpoint(cp)));
  EXPECT_TRUE(absl::IsNotFound(store_->GetCheckpoint("cp").status()));
  EXPECT_EQ(store_->Stats().checkpoints, 0);
}

TEST_F(SessionStoreTest, PutSessionsWritesForksInOneBatch) {
  const SessionRecord parent = Session("p", Tokens(10, 100));
  std::vector<SessionRecord> forks;
  for (int i = 0; i < 3; ++i) {
    forks.push_back(parent);
    forks.back().set_id("fork" + std::to_string(i));
    forks.back().set_parent_session_id("p");
  }
  WriteStats stats;
  ASSERT_TRUE(store_
                  ->PutSessions(forks, [&](int r, int page) { return encoder_(forks[r], page); },
                                &stats)
                  .ok());
  EXPECT_EQ(stats.pages_written, 3);  // each distinct page encoded once
  EXPECT_EQ(stats.pages_reused, 6);
  EXPECT_EQ(encoder_.requested.size(), 3u);
  EXPECT_EQ(store_->Stats().sessions, 3);
}

TEST_F(SessionStoreTest, PutSessionsIsAllOrNothing) {
  const SessionRecord a = Session("a", Tokens(10, 100)), b = Session("b", Tokens(10, 500));
  const std::vector<SessionRecord> both = {a, b};
  int calls = 0;
  const absl::Status failed = store_->PutSessions(both, [&](int r, int page)
                                                             -> absl::StatusOr<std::string> {
    if (++calls == 5) return absl::ResourceExhaustedError("out of pool pages");
    return encoder_(both[r], page);
  });
  EXPECT_TRUE(absl::IsResourceExhausted(failed)) << failed;
  EXPECT_TRUE(absl::IsNotFound(store_->GetSession("a").status()));
  EXPECT_TRUE(absl::IsNotFound(store_->GetPage(HashOf(a, 0)).status()));
  EXPECT_EQ(store_->Stats().pages, 0);

  const std::vector<SessionRecord> twice = {a, a};
  EXPECT_TRUE(absl::IsInvalidArgument(
      store_->PutSessions(twice, [&](int r, int page) { return encoder_(twice[r], page); })));
  EXPECT_EQ(store_->Stats().sessions, 0);
}

TEST_F(SessionStoreTest, RejectsRecordsThatBreakTheInvariants) {
  SessionRecord wrong_hash = Session("a", Tokens(10, 100));
  wrong_hash.set_page_hashes(1, std::string(16, 'x'));
  EXPECT_TRUE(absl::IsInvalidArgument(Put(wrong_hash)));
  SessionRecord too_long = Session("a", Tokens(10, 100));
  too_long.set_kv_length(11);
  EXPECT_TRUE(absl::IsInvalidArgument(Put(too_long)));
  SessionRecord no_id = Session("", Tokens(10, 100));
  EXPECT_TRUE(absl::IsInvalidArgument(Put(no_id)));
  SessionRecord bad_geometry = Session("a", Tokens(10, 100));
  bad_geometry.mutable_geometry()->set_dtype(9);
  EXPECT_TRUE(absl::IsInvalidArgument(Put(bad_geometry)));

  // A page of the wrong length from encode_missing is the caller's bug.
  const SessionRecord a = Session("a", Tokens(10, 100));
  const absl::Status s = store_->PutSession(a, [&](int page) {
    return EncodePage(Geometry(), RamPage(a, page).data(), 1);
  });
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_EQ(store_->Stats().pages, 0);
}

TEST_F(SessionStoreTest, MutationsWaitForLoadAll) {
  store_.reset();
  absl::StatusOr<std::unique_ptr<SessionStore>> store = SessionStore::Open(dir_, {});
  ASSERT_TRUE(store.ok());
  store_ = *std::move(store);
  EXPECT_TRUE(absl::IsFailedPrecondition(Put(Session("a", Tokens(3, 1)))));
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->DeleteSession("a")));
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->Verify().status()));
  EXPECT_TRUE(absl::IsNotFound(store_->GetSession("a").status()));  // reads work
}

TEST_F(SessionStoreTest, MetaKeyValues) {
  EXPECT_EQ(*store_->GetMeta(SessionStore::kFormatVersionKey), absl::StrCat(SessionStore::kFormatVersion));
  EXPECT_TRUE(absl::IsNotFound(store_->GetMeta("node").status()));
  ASSERT_TRUE(store_->PutMeta("node", "n1").ok());
  EXPECT_EQ(*store_->GetMeta("node"), "n1");
  EXPECT_TRUE(absl::IsInvalidArgument(store_->PutMeta(SessionStore::kFormatVersionKey, "2")));
}

TEST_F(SessionStoreTest, ConcurrentWritersEncodeEachPageOnce) {
  constexpr int kThreads = 4, kSessionsPerThread = 8;
  std::vector<std::thread> threads;
  std::vector<absl::flat_hash_set<PageHash>> asked(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kSessionsPerThread; ++i) {
        std::vector<int32_t> tokens = Tokens(30, 100);  // a common 5-page prefix
        tokens[20] = t * 100 + i;
        const SessionRecord r = Session(absl::StrCat("s", t, "_", i), tokens);
        Encoder encoder;
        EXPECT_TRUE(store_->PutSession(r, [&](int page) { return encoder(r, page); }).ok());
        asked[t].insert(encoder.requested.begin(), encoder.requested.end());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  size_t encoded = 0;
  absl::flat_hash_set<PageHash> distinct;
  for (const auto& set : asked) {
    encoded += set.size();
    distinct.insert(set.begin(), set.end());
  }
  EXPECT_EQ(encoded, distinct.size());  // no page encoded by two writers
  const StoreStats s = store_->Stats();
  EXPECT_EQ(s.pages, static_cast<int64_t>(distinct.size()));
  EXPECT_EQ(s.pages, 5 + kThreads * kSessionsPerThread * 3);
  absl::StatusOr<VerifyReport> report = store_->Verify();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(report->pages_checked, s.pages);
}

// Incremental verification (cache/record_validation.h): a persist hashes only
// the pages the stored record of the same id did not already verify.

TEST_F(SessionStoreTest, ARewriteWithOneMoreFullPageHashesOnlyThatPage) {
  const SessionRecord first = Session("a", Tokens(9, 100));  // kv 8: two full pages
  WriteStats stats;
  ASSERT_TRUE(Put(first, &stats).ok());
  EXPECT_EQ(stats.pages_hashed, 2);
  const SessionRecord grown = Session("a", Tokens(13, 100));  // kv 12: three full pages
  ASSERT_TRUE(Put(grown, &stats).ok());
  EXPECT_EQ(stats.pages_hashed, 1);
  EXPECT_EQ(stats.pages_written, 1);
  ASSERT_TRUE(Put(grown, &stats).ok());  // unchanged: nothing to hash
  EXPECT_EQ(stats.pages_hashed, 0);
}

TEST_F(SessionStoreTest, AGrownPartialPageIsHashedAgain) {
  ASSERT_TRUE(Put(Session("a", Tokens(7, 100))).ok());  // kv 6: pages of 4, 2
  WriteStats stats;
  ASSERT_TRUE(Put(Session("a", Tokens(8, 100)), &stats).ok());  // kv 7: pages of 4, 3
  EXPECT_EQ(stats.pages_hashed, 1);
}

TEST_F(SessionStoreTest, AReusedPageHashWithOtherTokensIsStillInvalidArgument) {
  const SessionRecord a = Session("a", Tokens(13, 100));  // kv 12: three full pages
  ASSERT_TRUE(Put(a).ok());
  const StoreStats before = store_->Stats();
  for (int changed : {1, 6, 11}) {  // a token of page 0, 1 and 2
    SessionRecord forged = a;
    forged.set_tokens(changed, 7);  // page_hashes kept: they name a's pages
    const absl::Status s = Put(forged);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << changed << ": " << s;
    EXPECT_NE(s.message().find(absl::StrCat("page_hashes[", changed / 4, "]")), std::string::npos)
        << s;
  }
  SessionRecord other_model = a;
  other_model.set_model_fingerprint("model-b");
  EXPECT_TRUE(absl::IsInvalidArgument(Put(other_model)));
  const StoreStats after = store_->Stats();
  EXPECT_EQ(after.pages, before.pages);
  EXPECT_EQ(after.page_references, before.page_references);
  absl::StatusOr<SessionRecord> stored = store_->GetSession("a");
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(SameRecord(*stored, a));
}

TEST_F(SessionStoreTest, AForkHashesOnlyThePagesAfterItsParentsPrefix) {
  ASSERT_TRUE(Put(Session("parent", Tokens(13, 100))).ok());  // three full pages
  std::vector<int32_t> tokens = Tokens(17, 100);              // kv 16: four full pages
  tokens[10] = 5;                                             // page 2 differs
  SessionRecord fork = Session("fork", tokens);
  fork.set_parent_session_id("parent");
  WriteStats stats;
  ASSERT_TRUE(Put(fork, &stats).ok());
  EXPECT_EQ(stats.pages_hashed, 2);
  EXPECT_EQ(stats.pages_reused, 2);
}

TEST_F(SessionStoreTest, ACheckpointOfAStoredSessionHashesNothing) {
  const SessionRecord a = Session("a", Tokens(13, 100));
  ASSERT_TRUE(Put(a).ok());
  CheckpointRecord c;
  c.set_id("c");
  *c.mutable_session() = a;
  WriteStats stats;
  ASSERT_TRUE(store_->PutCheckpoint(c, &stats).ok());
  EXPECT_EQ(stats.pages_hashed, 0);
}

TEST_F(SessionStoreTest, AnImportedCheckpointBringsThePagesTheStoreLacksInOneWriteOrNothing) {
  ASSERT_TRUE(Put(Session("a", Tokens(10, 100))).ok());  // pages 0, 1 and a partial one
  std::vector<int32_t> tokens = Tokens(14, 100);          // kv 13: pages 0..2 full, page 3 partial
  tokens[9] = 7;                                          // page 2 differs from a's
  CheckpointRecord c;
  c.set_id("imported");
  *c.mutable_session() = Session("gone", tokens);
  const StoreStats before = store_->Stats();

  // A page the encoder cannot give: nothing is written.
  WriteStats stats;
  absl::Status failed = store_->PutCheckpoint(
      c, [&](int page) -> absl::StatusOr<std::string> {
        if (page == 3) return absl::DataLossError("page 3 is not in the stream");
        return encoder_(c.session(), page);
      },
      &stats);
  EXPECT_EQ(failed.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(store_->Stats().pages, before.pages);
  EXPECT_EQ(store_->Stats().checkpoints, 0);
  EXPECT_FALSE(store_->HasPage(HashOf(c.session(), 2)));

  ASSERT_TRUE(store_->PutCheckpoint(c, [&](int page) { return encoder_(c.session(), page); }, &stats).ok());
  EXPECT_EQ(stats.pages_reused, 2);   // pages 0 and 1 were a's
  EXPECT_EQ(stats.pages_written, 2);  // pages 2 and 3 came with it
  EXPECT_EQ(store_->Stats().pages, before.pages + 2);
  ExpectPagesReadable(c.session());
  // And it is a checkpoint like any other after a reload.
  std::vector<SessionRecord> sessions;
  std::vector<CheckpointRecord> checkpoints;
  ASSERT_TRUE(store_->LoadAll(&sessions, &checkpoints).ok());
  ASSERT_EQ(checkpoints.size(), 1u);
  EXPECT_TRUE(SameRecord(checkpoints[0], c));
  EXPECT_EQ(store_->Stats().pages, before.pages + 2);
}

}  // namespace
}  // namespace kvs
