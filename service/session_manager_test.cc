// SessionManager with a real model, page pool and RocksDB store: fork
// reference counts, the busy protocol, eviction order, and persistence.
#include "service/session_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <set>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

#include "cache/fault_injection_fs.h"
#include "service/service_test_env.h"
#include "service/task_executor.h"

namespace kvs {
namespace {

std::vector<uint8_t> PageBytes(PagePool& pool, PageId page) {
  const uint8_t* p = pool.data(page);
  return std::vector<uint8_t>(p, p + pool.geometry().page_bytes());
}

TEST(SessionManager, ForkSharesEveryPageAndAddsOneReferencePerBranch) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(40);  // BOS + 40 tokens: 40 KV positions, 3 pages
  const int64_t pages_before = env.pool().Stats().pages_in_use;
  const int64_t stored_refs_before = env.store().Stats().page_references;

  auto branches = env.sessions().Fork(id, 3, {}, {});
  ASSERT_TRUE(branches.ok()) << branches.status();
  ASSERT_EQ(branches->size(), 3u);

  auto parent = env.sessions().Acquire(id);
  ASSERT_TRUE(parent.ok());
  const std::vector<PageId> table = (*parent)->kv->page_table();
  env.sessions().Release(*parent);
  ASSERT_EQ(table.size(), 3u);
  for (PageId p : table) EXPECT_EQ(env.pool().ref_count(p), 4) << "page " << p;
  for (const auto& b : *branches) EXPECT_EQ(b->kv->page_table(), table);
  EXPECT_EQ(env.pool().Stats().pages_in_use, pages_before) << "a fork copies no page";
  EXPECT_EQ(env.store().Stats().page_references, stored_refs_before + 3 * 3)
      << "each branch record references the parent's 3 stored pages";
  EXPECT_EQ(env.sessions().session_count(), 4);
}

TEST(SessionManager, ASecondAcquireOfABusySessionIsAbortedUntilItIsReleased) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(5);
  auto first = env.sessions().Acquire(id);
  ASSERT_TRUE(first.ok());
  auto second = env.sessions().Acquire(id);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(env.sessions().Delete(id).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(env.sessions().Fork(id, 1, {}, {}).status().code(), absl::StatusCode::kAborted);
  auto info = env.sessions().Get(id, false);
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->busy);

  env.sessions().Release(*first);
  auto third = env.sessions().Acquire(id);
  EXPECT_TRUE(third.ok()) << third.status();
  env.sessions().Release(*third);
  EXPECT_TRUE(env.sessions().Delete(id).ok());
  EXPECT_EQ(env.sessions().Acquire(id).status().code(), absl::StatusCode::kNotFound);
}

// Two calls wait for a Fork's read to end (a wait that ends soon by
// nature). When it ends, one takes the session and the other, now facing a
// running call, is answered ABORTED at once, not when the first ends.
TEST(SessionManager, OfTwoCallsWaitingForAReadToEndOneTakesTheSessionAndTheOtherIsAbortedAtOnce) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(5);
  auto reader = env.sessions().registry()->AcquireShared(id, "Fork", absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<std::shared_ptr<Session>> got[2];
  absl::Notification ended[2];
  std::vector<std::thread> callers;
  for (int i = 0; i < 2; ++i) {
    callers.emplace_back([&, i] {
      got[i] = env.sessions().Acquire(id, "Generate", absl::Now() + absl::Seconds(60));
      ended[i].Notify();
    });
  }
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(ended[0].HasBeenNotified() || ended[1].HasBeenNotified()) << "they did not wait for the read";
  const absl::Time read_ended = absl::Now();
  env.sessions().registry()->ReleaseShared(**reader);
  EXPECT_TRUE(ended[0].WaitForNotificationWithTimeout(absl::Seconds(30)) &&
              ended[1].WaitForNotificationWithTimeout(absl::Seconds(30)))
      << "the call that did not get the session waited for the one that did";
  EXPECT_LT(absl::Now() - read_ended, absl::Seconds(30));
  const int winner = got[0].ok() ? 0 : 1;
  ASSERT_TRUE(got[winner].ok()) << got[winner].status();
  EXPECT_TRUE(absl::IsAborted(got[1 - winner].status())) << got[1 - winner].status();
  EXPECT_THAT(std::string(got[1 - winner].status().message()), ::testing::HasSubstr("a Generate is running on it"));
  env.sessions().Release(*got[winner]);
  for (std::thread& t : callers) t.join();
}

TEST(SessionManager, ForksAndSnapshotsOfAnIdleSessionRunTogether) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(40);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      if (t % 2 == 0) {
        ok += env.sessions().Fork(id, 1, {}, {}).ok();
      } else {
        int64_t bytes = 0;
        ok += env.sessions().Snapshot(id, "s", &bytes).ok();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(env.sessions().session_count(), 1 + 4);
  auto info = env.sessions().Get(id, false);
  EXPECT_FALSE(info->busy);
  // The source is idle again: a Generate-style acquire succeeds.
  auto s = env.sessions().Acquire(id);
  EXPECT_TRUE(s.ok()) << s.status();
  env.sessions().Release(*s);
}

TEST(SessionManager, UnseededBranchesDrawDistinctSeedsFromTheSourceAndARestoredTwinForksAlike) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(20);
  int64_t bytes = 0;
  auto checkpoint = env.sessions().Snapshot(id, "before", &bytes);
  ASSERT_TRUE(checkpoint.ok());
  auto first = env.sessions().Fork(id, 3, {}, {});
  ASSERT_TRUE(first.ok());
  std::set<uint64_t> seeds;
  for (const auto& b : *first) seeds.insert(b->sampling.seed);
  EXPECT_EQ(seeds.size(), 3u) << "distinct seeds";
  // A second fork continues the source's generator: new seeds.
  auto second = env.sessions().Fork(id, 1, {}, {});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(seeds.count((*second)[0]->sampling.seed), 0u);
  // A twin restored from the checkpoint taken before, after a restart, forks alike.
  env.Reopen();
  auto twin = env.sessions().RestoreCheckpoint(checkpoint->id(), {});
  ASSERT_TRUE(twin.ok());
  auto twin_branches = env.sessions().Fork((*twin)->id, 3, {}, {});
  ASSERT_TRUE(twin_branches.ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*twin_branches)[i]->sampling.seed, (*first)[i]->sampling.seed) << i;
  }
  // And the source's advanced generator survived the restart.
  auto again = env.sessions().Fork(id, 1, {}, {});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(seeds.count((*again)[0]->sampling.seed), 0u);
  EXPECT_NE((*again)[0]->sampling.seed, (*second)[0]->sampling.seed);
}

// A store write that fails leaves the session dirty (RAM newer than disk):
// it is never evicted, and the next persist of it writes it.
TEST(SessionManager, AFailedWriteLeavesTheSessionDirtyAndTheNextPersistRetriesIt) {
  KVS_REQUIRE_SHARED_MODEL();
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  ServiceTestEnv env(/*max_pages=*/64, /*page_tokens=*/16, StoreOn(fs));
  const std::string id = env.MakeSession(10);

  // Append 30 tokens while the disk refuses writes.
  auto s = env.sessions().Acquire(id);
  ASSERT_TRUE(s.ok());
  std::vector<int32_t> more(30, 77);
  env.Prefill(**s, more);
  fs->FailWrites(FaultInjectionFileSystem::Fault::kIoError);
  EXPECT_FALSE(env.sessions().PersistAndRelease(*s).ok());
  EXPECT_TRUE((*s)->dirty);
  EXPECT_FALSE(env.sessions().MakeRoom(env.pool().max_pages())) << "a dirty session is never evicted";
  EXPECT_TRUE(env.sessions().Get(id, false)->resident);
  EXPECT_EQ(env.store().GetSession(id)->tokens_size(), 11) << "the disk still holds the old state";

  // The disk recovers: the next persist (any job's end) writes everything.
  fs->Heal();
  auto again = env.sessions().Acquire(id);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(env.sessions().PersistAndRelease(*again).ok());
  EXPECT_FALSE((*again)->dirty);
  EXPECT_EQ(env.store().GetSession(id)->tokens_size(), 41);
  env.Reopen();
  EXPECT_EQ(env.sessions().Get(id, true)->tokens.size(), 41u);
  auto loaded = env.sessions().Acquire(id);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->kv->length(), 40);
  env.sessions().Release(*loaded);
}

// A restore whose page files the disk fails to read answers the I/O
// error (INTERNAL), not DATA_LOSS: the session is intact and loads once
// the disk reads again.
TEST(SessionManager, ARestoreTheDiskFailsToReadIsInternalNotDataLossAndLoadsOnceItReads) {
  KVS_REQUIRE_SHARED_MODEL();
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  ServiceTestEnv env(/*max_pages=*/64, /*page_tokens=*/16, StoreOn(fs));
  const std::string id = env.MakeSession(40);
  env.Reopen();  // its KV on disk only
  fs->FailReadsOf(".kvpage");
  absl::StatusOr<std::shared_ptr<Session>> s = env.sessions().Acquire(id);
  EXPECT_TRUE(absl::IsInternal(s.status())) << s.status();
  EXPECT_THAT(std::string(s.status().message()), ::testing::HasSubstr("cannot be read"));
  fs->Heal();
  s = env.sessions().Acquire(id);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->kv->length(), 40);
  env.sessions().Release(*s);
}

TEST(SessionManager, EvictionDropsTheLeastRecentlyUsedIdleSessionsFirst) {
  KVS_REQUIRE_SHARED_MODEL();
  // 12 pages: three sessions of 3 pages each fill 9.
  ServiceTestEnv env(/*max_pages=*/12);
  const std::string a = env.MakeSession(40, 10);
  const std::string b = env.MakeSession(40, 50);
  const std::string c = env.MakeSession(40, 90);
  // Use them in the order b, a, c: b is now the least recently used.
  for (const std::string& id : {b, a, c}) {
    auto s = env.sessions().Acquire(id);
    ASSERT_TRUE(s.ok());
    absl::SleepFor(absl::Milliseconds(2));
    env.sessions().Release(*s);
  }
  auto resident = [&](const std::string& id) { return env.sessions().Get(id, false)->resident; };
  ASSERT_TRUE(resident(a) && resident(b) && resident(c));

  // Asking for 5 free pages (3 are free) evicts exactly one session: b.
  EXPECT_TRUE(env.sessions().MakeRoom(5));
  EXPECT_FALSE(resident(b));
  EXPECT_TRUE(resident(a));
  EXPECT_TRUE(resident(c));
  // Then a.
  EXPECT_TRUE(env.sessions().MakeRoom(8));
  EXPECT_FALSE(resident(a));
  EXPECT_TRUE(resident(c));
}

TEST(SessionManager, ABusySessionIsNeverEvicted) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env(/*max_pages=*/6);
  const std::string a = env.MakeSession(40);
  auto held = env.sessions().Acquire(a);
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE(env.sessions().MakeRoom(6)) << "only a busy session could free pages";
  EXPECT_TRUE((*held)->resident());
  env.sessions().Release(*held);
  EXPECT_TRUE(env.sessions().MakeRoom(6));
}

TEST(SessionManager, AnEvictedSessionComesBackFromDiskWithTheSameKvBytes) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env(/*max_pages=*/8);
  const std::string id = env.MakeSession(40);
  std::vector<std::vector<uint8_t>> before;
  {
    auto s = env.sessions().Acquire(id);
    ASSERT_TRUE(s.ok());
    for (PageId p : (*s)->kv->page_table()) before.push_back(PageBytes(env.pool(), p));
    env.sessions().Release(*s);
  }
  ASSERT_TRUE(env.sessions().MakeRoom(env.pool().max_pages()));
  ASSERT_FALSE(env.sessions().Get(id, false)->resident);
  // Overwrite the freed pages' memory so a stale read would show.
  for (int i = 0; i < 8; ++i) {
    auto p = env.pool().Allocate();
    ASSERT_TRUE(p.ok());
    std::memset(env.pool().data(*p), 0xAB, env.pool().geometry().page_bytes());
    env.pool().Release(*p);
  }
  auto s = env.sessions().Acquire(id);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ((*s)->kv->num_pages(), static_cast<int>(before.size()));
  const KvGeometry& g = env.pool().geometry();
  for (size_t i = 0; i < before.size(); ++i) {
    const std::vector<uint8_t> after = PageBytes(env.pool(), (*s)->kv->page_table()[i]);
    // The last page holds 40 % 16 = 8 positions; compare only written slots.
    const int n = i + 1 < before.size() ? g.page_tokens : 40 % g.page_tokens;
    for (int layer = 0; layer < g.n_layers; ++layer) {
      for (KvPart part : {KvPart::kKey, KvPart::kValue}) {
        for (int h = 0; h < g.n_kv_heads; ++h) {
          const size_t off = g.block_offset(layer, part, h);
          EXPECT_EQ(0, std::memcmp(before[i].data() + off, after.data() + off, g.slot_offset(n)))
              << "page " << i << " layer " << layer << " head " << h;
        }
      }
    }
  }
  env.sessions().Release(*s);
}

// An Acquire that waits for KV memory (the session is on disk, the pool is
// held by others) waits in a BlockingWait: on an executor of one io
// thread, the tasks queued behind it still run.
TEST(SessionManager, AnAcquireWaitingForKvMemoryLetsTheIoTasksQueuedBehindItRun) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env(/*max_pages=*/16);
  const std::string id = env.MakeSession(40);  // 3 pages
  env.Reopen();                                 // its KV only on disk
  std::vector<PageId> held;                     // every page, held by "others"
  for (absl::StatusOr<PageId> p = env.pool().Allocate(); p.ok(); p = env.pool().Allocate()) held.push_back(*p);
  ASSERT_EQ(held.size(), 16u);

  TaskExecutor io(1);
  absl::Notification acquire_ended, next_ran;
  absl::StatusOr<std::shared_ptr<Session>> acquired;
  io.Submit([&] {
    acquired = env.sessions().Acquire(id, "Generate", absl::Now() + absl::Seconds(60));
    acquire_ended.Notify();
  });
  absl::SleepFor(absl::Milliseconds(50));
  io.Submit([&] { next_ran.Notify(); });
  EXPECT_TRUE(next_ran.WaitForNotificationWithTimeout(absl::Seconds(20)))
      << "the task queued behind the waiting Acquire did not run";
  EXPECT_FALSE(acquire_ended.HasBeenNotified()) << "the Acquire did not wait";

  for (PageId p : held) env.pool().Release(p);
  acquire_ended.WaitForNotification();
  ASSERT_TRUE(acquired.ok()) << acquired.status();
  EXPECT_TRUE((*acquired)->resident());
  env.sessions().Release(*acquired);
}

// An Acquire waiting for KV memory is woken when another session becomes
// evictable (released idle and clean), though no page was freed: it then
// evicts that session and loads. Nothing polls: without the wake it would
// wait out its minute.
TEST(SessionManager, AnAcquireWaitingForKvMemoryIsWokenWhenAnotherSessionIsReleased) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env(/*max_pages=*/4);
  const std::string stored = env.MakeSession(40);  // 3 pages
  env.Reopen();                                     // its KV only on disk
  const std::string resident = env.MakeSession(40, 90);
  auto held = env.sessions().Acquire(resident);
  ASSERT_TRUE(held.ok()) << held.status();

  absl::Notification acquire_ended;
  absl::StatusOr<std::shared_ptr<Session>> acquired;
  std::thread caller([&] {
    acquired = env.sessions().Acquire(stored, "Generate", absl::Now() + absl::Seconds(60));
    acquire_ended.Notify();
  });
  // The caller holds `stored` from its Acquire's start: then it looks for
  // room, finds none and waits (a release before it looks is seen too).
  for (const absl::Time end = absl::Now() + absl::Seconds(30);
       !env.sessions().Get(stored, false)->busy && absl::Now() < end;) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_FALSE(acquire_ended.WaitForNotificationWithTimeout(absl::Milliseconds(100)))
      << "it did not wait: " << acquired.status();
  const absl::Time released = absl::Now();
  env.sessions().Release(*held);
  EXPECT_TRUE(acquire_ended.WaitForNotificationWithTimeout(absl::Seconds(30))) << "the release did not wake it";
  caller.join();
  EXPECT_LT(absl::Now() - released, absl::Seconds(30));
  ASSERT_TRUE(acquired.ok()) << acquired.status();
  EXPECT_TRUE((*acquired)->resident());
  EXPECT_FALSE(env.sessions().Get(resident, false)->resident) << "evicted for it";
  env.sessions().Release(*acquired);
}

// A checkpoint deleted while a Restore loads it: the Restore answers
// NOT_FOUND and writes nothing (it would otherwise write back the pages
// the delete dropped, past what ReserveRestore reserved). Deleted once the
// restored record is written, the restored session keeps its pages.
TEST(SessionManager, ARestoreWhoseCheckpointIsDeletedDuringItsLoadIsNotFoundAndWritesNothing) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env(/*max_pages=*/64);
  const std::string source = env.MakeSession(40);  // 3 pages
  int64_t written = 0;
  absl::StatusOr<CheckpointRecord> checkpoint = env.sessions().Snapshot(source, "c", &written);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ASSERT_TRUE(env.sessions().Delete(source).ok());
  ASSERT_EQ(env.store().Stats().pages, 3) << "the checkpoint's, alone";

  absl::Status deleted = absl::UnknownError("the hook did not run");
  env.sessions().SetAfterRestoreLoadForTest(
      [&] { deleted = env.sessions().DeleteCheckpoint(checkpoint->id()); });
  absl::StatusOr<std::shared_ptr<Session>> restored =
      env.sessions().RestoreCheckpoint(checkpoint->id(), {});
  env.sessions().SetAfterRestoreLoadForTest(nullptr);
  EXPECT_TRUE(deleted.ok()) << deleted;
  ASSERT_TRUE(absl::IsNotFound(restored.status())) << restored.status();
  EXPECT_THAT(std::string(restored.status().message()), ::testing::HasSubstr("was deleted"));
  const StoreStats after = env.store().Stats();
  EXPECT_EQ(after.pages, 0) << "no page written back";
  EXPECT_EQ(after.sessions, 0);
  EXPECT_EQ(after.checkpoints, 0);
  EXPECT_EQ(env.pool().Stats().pages_in_use, 0) << "the loaded KV given back";
  EXPECT_TRUE(env.sessions().List("", 10).empty());
  env.Reopen();
  EXPECT_TRUE(env.sessions().List("", 10).empty()) << "nothing on disk either";

  // The other order: restored, then deleted. The restored session keeps
  // the pages and loads them after a restart.
  const std::string second = env.MakeSession(40);
  checkpoint = env.sessions().Snapshot(second, "c2", &written);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ASSERT_TRUE(env.sessions().Delete(second).ok());
  restored = env.sessions().RestoreCheckpoint(checkpoint->id(), {});
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE(env.sessions().DeleteCheckpoint(checkpoint->id()).ok());
  EXPECT_EQ(env.store().Stats().pages, 3);
  const std::string twin = (*restored)->id;
  env.Reopen();
  absl::StatusOr<std::shared_ptr<Session>> loaded = env.sessions().Acquire(twin);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->kv->length(), 40);
  env.sessions().Release(*loaded);

  // Deleted during the load and listed again under the same id with other
  // pages (as an import of another stream would): not the checkpoint the
  // restore loaded, so NOT_FOUND too, nothing written.
  const std::string third = env.MakeSession(40, 200);
  checkpoint = env.sessions().Snapshot(third, "c3", &written);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  absl::StatusOr<CheckpointRecord> other = env.sessions().Snapshot(twin, "other", &written);
  ASSERT_TRUE(other.ok()) << other.status();
  const StoreStats before = env.store().Stats();
  env.sessions().SetAfterRestoreLoadForTest([&] {
    ASSERT_TRUE(env.sessions().DeleteCheckpoint(checkpoint->id()).ok());
    CheckpointRecord same_id = *other;
    same_id.set_id(checkpoint->id());
    env.sessions().registry()->AddCheckpoint(same_id);
  });
  restored = env.sessions().RestoreCheckpoint(checkpoint->id(), {});
  env.sessions().SetAfterRestoreLoadForTest(nullptr);
  ASSERT_TRUE(absl::IsNotFound(restored.status())) << restored.status();
  EXPECT_EQ(env.store().Stats().sessions, before.sessions) << "no session written";
  EXPECT_EQ(env.store().Stats().pages, before.pages) << "no page written back";
}

// A DeleteCheckpoint that comes while a Restore writes the restored
// record waits for it (the checkpoint stays listed meanwhile), then leaves
// the pages to the restored session.
TEST(SessionManager, ADeleteCheckpointWaitsForARestoreWritingItsRecord) {
  KVS_REQUIRE_SHARED_MODEL();
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  ServiceTestEnv env(/*max_pages=*/64, /*page_tokens=*/16, StoreOn(fs));
  const std::string source = env.MakeSession(40);  // 3 pages
  int64_t written = 0;
  absl::StatusOr<CheckpointRecord> checkpoint = env.sessions().Snapshot(source, "c", &written);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ASSERT_TRUE(env.sessions().Delete(source).ok());

  // Writes are held from the end of the restore's load (so the first
  // held write is its record's).
  env.sessions().SetAfterRestoreLoadForTest([&] { fs->HoldWrites(); });
  absl::StatusOr<std::shared_ptr<Session>> restored;
  absl::Status deleted = absl::UnknownError("not run");
  absl::Notification delete_ended;
  std::thread restore, remove;
  auto end_threads = absl::MakeCleanup([&] {
    fs->ReleaseWrites();
    if (restore.joinable()) restore.join();
    if (remove.joinable()) remove.join();
  });
  restore = std::thread([&] { restored = env.sessions().RestoreCheckpoint(checkpoint->id(), {}); });
  for (const absl::Time end = absl::Now() + absl::Seconds(30); fs->held_writes() == 0 && absl::Now() < end;) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_GT(fs->held_writes(), 0) << "the restore's write did not start";
  remove = std::thread([&] {
    deleted = env.sessions().DeleteCheckpoint(checkpoint->id());
    delete_ended.Notify();
  });
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(delete_ended.HasBeenNotified());
  EXPECT_TRUE(env.sessions().CheckpointOwnerOf(checkpoint->id()).ok()) << "removed while the restore wrote";
  fs->ReleaseWrites();
  restore.join();
  remove.join();
  env.sessions().SetAfterRestoreLoadForTest(nullptr);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE(deleted.ok()) << deleted;
  EXPECT_EQ(env.store().Stats().pages, 3) << "the restored session's";
  EXPECT_EQ(env.store().Stats().checkpoints, 0);
  const std::string twin = (*restored)->id;
  env.Reopen();
  absl::StatusOr<std::shared_ptr<Session>> loaded = env.sessions().Acquire(twin);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->kv->length(), 40);
  env.sessions().Release(*loaded);
}

// A restored checkpoint comes into the registry idle, stored and
// resident: evictable, so a call that waits for KV memory its restore took
// is woken as it is added, and evicts it.
TEST(SessionManager, AnAcquireWaitingForKvMemoryIsWokenWhenARestoredCheckpointIsAdded) {
  KVS_REQUIRE_SHARED_MODEL();
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  ServiceTestEnv env(/*max_pages=*/4, /*page_tokens=*/16, StoreOn(fs));
  const std::string source = env.MakeSession(40);  // 3 pages
  int64_t written = 0;
  absl::StatusOr<CheckpointRecord> checkpoint = env.sessions().Snapshot(source, "c", &written);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  env.Reopen();
  const std::string stored = env.MakeSession(40, 90);  // 3 pages of its own
  env.Reopen();                                         // both only on disk

  // The restore loads its 3 pages, then stalls writing its record: its
  // session is not in the registry yet, so nothing can evict it, and it
  // cannot be added before the writes are let go.
  fs->HoldWrites();
  absl::StatusOr<std::shared_ptr<Session>> restored;
  absl::Notification acquire_ended;
  absl::StatusOr<std::shared_ptr<Session>> acquired;
  std::thread restore, caller;
  auto end_threads = absl::MakeCleanup([&] {
    fs->ReleaseWrites();
    if (restore.joinable()) restore.join();
    if (caller.joinable()) caller.join();
  });
  restore = std::thread([&] { restored = env.sessions().RestoreCheckpoint(checkpoint->id(), {}); });
  for (const absl::Time end = absl::Now() + absl::Seconds(30);
       env.pool().Stats().pages_in_use < 3 && absl::Now() < end;) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(env.pool().Stats().pages_in_use, 3);

  caller = std::thread([&] {
    acquired = env.sessions().Acquire(stored, "Generate", absl::Now() + absl::Seconds(60));
    acquire_ended.Notify();
  });
  // It looks for room, finds none and waits.
  for (const absl::Time end = absl::Now() + absl::Seconds(30);
       env.pool().room_waiters() == 0 && !acquire_ended.HasBeenNotified() && absl::Now() < end;) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(env.pool().room_waiters(), 1) << "it did not wait: " << acquired.status();
  const absl::Time added = absl::Now();
  fs->ReleaseWrites();
  restore.join();
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE(acquire_ended.WaitForNotificationWithTimeout(absl::Seconds(30))) << "the add did not wake it";
  caller.join();
  EXPECT_LT(absl::Now() - added, absl::Seconds(30));
  ASSERT_TRUE(acquired.ok()) << acquired.status();
  EXPECT_TRUE((*acquired)->resident());
  EXPECT_FALSE(env.sessions().Get((*restored)->id, false)->resident) << "evicted for it";
  env.sessions().Release(*acquired);
}

// Fork and a checkpoint's restore load a stored session's KV as Acquire
// does: when running calls hold the KV memory they wait, within their
// deadline, for room to be given back, instead of answering
// RESOURCE_EXHAUSTED at once.
TEST(SessionManager, AForkAndACheckpointRestoreWaitForKvMemoryAndAreWokenByARelease) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env(/*max_pages=*/4);
  const std::string stored = env.MakeSession(40);  // 3 pages
  int64_t written = 0;
  absl::StatusOr<CheckpointRecord> checkpoint = env.sessions().Snapshot(stored, "c", &written);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  env.Reopen();  // its KV only on disk
  const std::string resident = env.MakeSession(40, 90);

  for (const bool fork : {true, false}) {
    SCOPED_TRACE(fork ? "Fork" : "RestoreCheckpoint");
    auto held = env.sessions().Acquire(resident);  // 3 of the 4 pages, not evictable
    ASSERT_TRUE(held.ok()) << held.status();
    absl::Notification started, ended;
    absl::Status result;
    std::string made;
    std::thread caller([&] {
      started.Notify();
      const absl::Time deadline = absl::Now() + absl::Seconds(60);
      if (fork) {
        auto branches = env.sessions().Fork(stored, 1, {}, {}, deadline);
        result = branches.status();
        if (branches.ok()) made = (*branches)[0]->id;
      } else {
        auto restored = env.sessions().RestoreCheckpoint(checkpoint->id(), {}, deadline);
        result = restored.status();
        if (restored.ok()) made = (*restored)->id;
      }
      ended.Notify();
    });
    started.WaitForNotification();
    for (const absl::Time end = absl::Now() + absl::Seconds(30);
         env.pool().room_waiters() == 0 && !ended.HasBeenNotified() && absl::Now() < end;) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    EXPECT_EQ(env.pool().room_waiters(), 1) << "it did not wait: " << result;
    const absl::Time released = absl::Now();
    env.sessions().Release(*held);
    EXPECT_TRUE(ended.WaitForNotificationWithTimeout(absl::Seconds(30))) << "the release did not wake it";
    caller.join();
    EXPECT_LT(absl::Now() - released, absl::Seconds(30));
    ASSERT_TRUE(result.ok()) << result;
    EXPECT_TRUE(env.sessions().Get(made, false).ok());
    // Back to the start: only `resident` in RAM.
    ASSERT_TRUE(env.sessions().Delete(made).ok());
    env.sessions().MakeRoom(env.pool().max_pages());
    auto again = env.sessions().Acquire(resident);
    ASSERT_TRUE(again.ok()) << again.status();
    env.sessions().Release(*again);
  }
}

// A Fork waiting for KV room to load its stored source holds it as a
// reader, but not the lock its other readers load and write under: a
// second Fork of the same source waits for room beside it (instead of
// blocking an io thread on that lock), and both go on once room is back.
TEST(SessionManager, TwoForksOfOneStoredSourceWaitForKvMemoryTogether) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env(/*max_pages=*/4);
  const std::string stored = env.MakeSession(40);  // 3 pages
  env.Reopen();
  const std::string resident = env.MakeSession(40, 90);
  auto held = env.sessions().Acquire(resident);
  ASSERT_TRUE(held.ok()) << held.status();
  absl::StatusOr<std::vector<std::shared_ptr<Session>>> forked[2];
  std::vector<std::thread> forks;
  for (auto& f : forked) {
    forks.emplace_back([&] { f = env.sessions().Fork(stored, 1, {}, {}, absl::Now() + absl::Seconds(60)); });
  }
  for (const absl::Time end = absl::Now() + absl::Seconds(30); env.pool().room_waiters() < 2 && absl::Now() < end;) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(env.pool().room_waiters(), 2);
  env.sessions().Release(*held);
  for (std::thread& t : forks) t.join();
  for (const auto& f : forked) EXPECT_TRUE(f.ok()) << f.status();
}

// A load that finds no KV room takes no page: had it taken the free ones
// and given them back, each give-back would wake the other callers waiting
// for room, whose loads would do the same to it, in turn, until a deadline.
TEST(SessionManager, ALoadThatFindsNoKvRoomTakesNoPageAndWakesNoOne) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env(/*max_pages=*/4);
  const std::string stored = env.MakeSession(40);  // 3 pages
  env.Reopen();                                     // its KV only on disk
  std::vector<PageId> held;                         // 2 pages held by "others": 2 free
  for (int i = 0; i < 2; ++i) held.push_back(*env.pool().Allocate());
  const int64_t seen = env.pool().room_given_back();
  absl::StatusOr<std::shared_ptr<Session>> s = env.sessions().Acquire(stored, "Generate", absl::Now());
  EXPECT_TRUE(absl::IsResourceExhausted(s.status())) << s.status();
  EXPECT_THAT(std::string(s.status().message()), ::testing::HasSubstr("loading the session takes 3 pages"));
  EXPECT_EQ(env.pool().room_given_back(), seen) << "pages were taken and given back";
  EXPECT_EQ(env.pool().Stats().pages_in_use, 2);
  for (PageId p : held) env.pool().Release(p);
}

// ExportSession counts the stream against the migration memory as it is
// built: Export asks `reserve` before each page, and stops at a refusal.
TEST(SessionManager, AnExportAsksItsReserveBeforeEachPageAndStopsAtARefusal) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(100);  // 7 pages
  ExportRequest request;
  request.id = id;
  std::vector<int64_t> asked;
  request.reserve = [&](int64_t bytes) {
    asked.push_back(bytes);
    return absl::OkStatus();
  };
  absl::StatusOr<ExportedStream> whole = env.sessions().Export(request);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(asked.size(), 7u) << "once per page";
  EXPECT_TRUE(std::is_sorted(asked.begin(), asked.end()));
  EXPECT_LE(asked.back(), static_cast<int64_t>(whole->bytes.size()));
  // All but the pages' framing and the stream's end (a few hundred bytes;
  // ExportSession reserves the whole stream once it is built).
  EXPECT_GE(asked.back(), static_cast<int64_t>(whole->bytes.size()) - 512);

  const int64_t limit = asked[2];
  asked.clear();
  request.reserve = [&](int64_t bytes) {
    asked.push_back(bytes);
    return bytes > limit ? absl::ResourceExhaustedError("no room") : absl::OkStatus();
  };
  absl::StatusOr<ExportedStream> refused = env.sessions().Export(request);
  EXPECT_EQ(refused.status(), absl::ResourceExhaustedError("no room"));
  EXPECT_EQ(asked.size(), 4u) << "it stopped at the first refusal";
}

// Fork and Snapshot call their `reserve` once they hold the session (a
// writer cannot take it then, so its record stays as the reservation saw
// it), and a refusal there is the call's answer with nothing written, and,
// for a Fork of a session whose KV is on disk, nothing loaded.
TEST(SessionManager, AForkOrSnapshotReservesWhileItHoldsTheSessionAndARefusalWritesNothing) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(40);
  env.Reopen();  // its KV on disk only
  const StoreStats stored = env.store().Stats();
  const int sessions = env.sessions().registry()->session_count();
  int reserved = 0;
  const auto refuse_while_held = [&] {
    ++reserved;
    // A writer cannot take the session now.
    EXPECT_TRUE(absl::IsAborted(env.sessions().Acquire(id).status()));
    return absl::ResourceExhaustedError("store quota");
  };
  EXPECT_EQ(env.sessions().Fork(id, 2, {}, {}, absl::Now(), std::nullopt, refuse_while_held).status(),
            absl::ResourceExhaustedError("store quota"));
  EXPECT_EQ(env.sessions().Snapshot(id, "", nullptr, absl::Now(), refuse_while_held).status(),
            absl::ResourceExhaustedError("store quota"));
  EXPECT_EQ(reserved, 2);
  EXPECT_EQ(env.sessions().registry()->session_count(), sessions) << "no branch";
  EXPECT_EQ(env.sessions().registry()->checkpoint_count(), 0);
  EXPECT_EQ(env.store().Stats().sessions, stored.sessions);
  EXPECT_EQ(env.store().Stats().checkpoints, stored.checkpoints);
  EXPECT_EQ(env.store().Stats().page_bytes, stored.page_bytes);
  EXPECT_FALSE(env.sessions().Get(id, false)->resident) << "the refused Fork loaded nothing";
  EXPECT_EQ(env.pool().Stats().pages_in_use, 0);

  // Allowed, both write; and the session is free again afterwards.
  const auto allow = [&] { return absl::OkStatus(); };
  EXPECT_TRUE(env.sessions().Fork(id, 2, {}, {}, absl::Now(), std::nullopt, allow).ok());
  EXPECT_TRUE(env.sessions().Snapshot(id, "", nullptr, absl::Now(), allow).ok());
  absl::StatusOr<std::shared_ptr<Session>> s = env.sessions().Acquire(id);
  ASSERT_TRUE(s.ok()) << s.status();
  env.sessions().Release(*s);
}

// A stored session whose KV is larger than the whole pool (written by a
// server with more KV memory) can never load here: RESOURCE_EXHAUSTED at
// once, naming the sizes, not after waiting out the call's deadline.
TEST(SessionManager, ASessionLargerThanTheWholeKvPoolIsRefusedAtOnce) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(40);  // 3 pages
  PagePool small(env.pool().geometry(), 2);
  SessionManager here(env.model(), &small, &env.store(), std::string(32, 'f'), env.limits());
  ASSERT_TRUE(here.LoadFromStore().ok());
  const absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<Session>> s = here.Acquire(id, "Generate", start + absl::Seconds(30));
  EXPECT_TRUE(absl::IsResourceExhausted(s.status())) << s.status();
  EXPECT_THAT(std::string(s.status().message()), ::testing::HasSubstr("takes 3 pages; this server's KV cache holds 2"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_FALSE(here.Get(id, false)->busy) << "released";
  // Fork loads for readers and says the same.
  absl::StatusOr<std::vector<std::shared_ptr<Session>>> forked = here.Fork(id, 1, {}, {});
  EXPECT_TRUE(absl::IsResourceExhausted(forked.status())) << forked.status();
  EXPECT_THAT(std::string(forked.status().message()),
              ::testing::HasSubstr("takes 3 pages; this server's KV cache holds 2"));
}

TEST(SessionManager, SessionsSurviveARestartWithTheirTokensAndPages) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(40);
  auto branches = env.sessions().Fork(id, 2, {7, 8}, {{"k", "v"}});
  ASSERT_TRUE(branches.ok());
  int64_t bytes = 0;
  auto checkpoint = env.sessions().Snapshot(id, "cp", &bytes);
  ASSERT_TRUE(checkpoint.ok());
  env.Reopen();
  EXPECT_EQ(env.sessions().session_count(), 3);
  auto info = env.sessions().Get((*branches)[1]->id, true);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->length, 41);
  EXPECT_EQ(info->sampling.seed, 8u);
  EXPECT_EQ(info->labels.at("k"), "v");
  EXPECT_FALSE(info->resident);
  auto restored = env.sessions().RestoreCheckpoint(checkpoint->id(), {});
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ((*restored)->TokenCount(), 41);
  EXPECT_EQ((*restored)->kv->length(), 40);
}

}  // namespace
}  // namespace kvs
