// SessionExpiry over a real model, page pool and RocksDB store: what an
// idle session's expiry deletes, what it leaves, and what counts as use.
// Sweeps are called with an explicit "now", so no test waits for a TTL
// but the last one, which runs the sweeping thread.
#include "service/session_expiry.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "cache/fault_injection_fs.h"
#include "cache/migration_stream.h"
#include "service/service_test_env.h"

namespace kvs {
namespace {

constexpr absl::Duration kTtl = absl::Hours(1);

// A moment strictly after every use made so far (uses are stamped in
// microseconds).
absl::Time AfterNow() {
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const absl::Time t = absl::Now();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return t;
}

// Acquires and releases the session, as a Generate would.
void Use(ServiceTestEnv& env, const std::string& id) {
  auto s = env.sessions().Acquire(id);
  ASSERT_TRUE(s.ok()) << s.status();
  env.sessions().Release(*s);
}

TEST(SessionExpiry, ASessionUnusedForTheTtlGoesFromRamAndFromTheStore) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(40);
  ASSERT_GT(env.store().Stats().pages, 0);
  SessionExpiry expiry(&env.sessions(), kTtl);

  EXPECT_EQ(expiry.Sweep(absl::Now()), 0) << "just used";
  EXPECT_EQ(expiry.Sweep(AfterNow() + kTtl), 1);
  EXPECT_EQ(expiry.expired_count(), 1);
  EXPECT_TRUE(absl::IsNotFound(env.sessions().Get(id, false).status()));
  EXPECT_TRUE(absl::IsNotFound(env.store().GetSession(id).status()));
  EXPECT_EQ(env.store().Stats().sessions, 0);
  EXPECT_EQ(env.store().Stats().pages, 0) << "no other record referenced its pages";
  env.Reopen();
  EXPECT_EQ(env.sessions().session_count(), 0);
}

TEST(SessionExpiry, OnlySessionsUnusedSinceTheCutoffGo) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string idle = env.MakeSession(10);
  const std::string used = env.MakeSession(10, 50);
  const absl::Time between = AfterNow();
  Use(env, used);
  SessionExpiry expiry(&env.sessions(), kTtl);

  EXPECT_EQ(expiry.Sweep(between + kTtl), 1);
  EXPECT_TRUE(absl::IsNotFound(env.sessions().Get(idle, false).status()));
  EXPECT_TRUE(env.sessions().Get(used, false).ok());
}

TEST(SessionExpiry, AHeldSessionStaysAndItsReleaseRestartsItsClock) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(10);
  SessionExpiry expiry(&env.sessions(), kTtl);
  const absl::Time far = absl::Now() + 10 * kTtl;

  auto held = env.sessions().Acquire(id);  // a Generate
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(expiry.Sweep(far), 0);
  const absl::Time before_release = AfterNow();
  env.sessions().Release(*held);
  EXPECT_EQ(expiry.Sweep(before_release + kTtl), 0) << "used until its release";

  auto reader = env.sessions().registry()->AcquireShared(id, "Fork", absl::Now());  // a Fork
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(expiry.Sweep(far), 0);
  env.sessions().registry()->ReleaseShared(**reader);

  EXPECT_EQ(expiry.Sweep(AfterNow() + kTtl), 1);
}

// The sweep lists, then takes each session: whatever happened in between
// is checked again as it takes it.
TEST(SessionExpiry, ASessionHeldOrUsedAfterTheSweepListedItIsNotTaken) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(10);
  const absl::Time later = absl::Now() + kTtl;  // a cutoff after every use below
  ASSERT_EQ(env.sessions().UnusedSince(later), std::vector<std::string>{id});

  auto held = env.sessions().Acquire(id);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(env.sessions().DeleteIfUnusedSince(id, later).value(), false) << "held by a Generate";
  env.sessions().Release(*held);
  auto reader = env.sessions().registry()->AcquireShared(id, "Fork", absl::Now());
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(env.sessions().DeleteIfUnusedSince(id, later).value(), false) << "held by a Fork";
  env.sessions().registry()->ReleaseShared(**reader);

  const absl::Time listed = AfterNow();
  ASSERT_EQ(env.sessions().UnusedSince(listed), std::vector<std::string>{id});
  Use(env, id);
  EXPECT_EQ(env.sessions().DeleteIfUnusedSince(id, listed).value(), false) << "used after the listing";
  EXPECT_TRUE(env.sessions().Get(id, false).ok());
  EXPECT_EQ(env.sessions().DeleteIfUnusedSince(id, AfterNow()).value(), true);
}

// A call that meets the session while the expiry deletes it waits for the
// delete (a store write) and learns the session is gone, rather than
// ABORTED "busy" and a retry that finds nothing.
TEST(SessionExpiry, ACallThatComesWhileTheSessionIsBeingDeletedGetsNotFound) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(10);
  auto taken = env.sessions().registry()->TakeIfUnusedSince(id, absl::ToUnixMicros(AfterNow()), "Expiry");
  ASSERT_TRUE(taken.ok()) << taken.status();
  absl::Status seen;
  std::thread call([&] { seen = env.sessions().Acquire(id, "Generate", absl::Now() + absl::Seconds(60)).status(); });
  // Past the grace a running call gets before a conflict is ABORTED.
  absl::SleepFor(3 * SessionRegistry::kCancelGrace);
  const absl::Time removed = absl::Now();
  env.sessions().registry()->Remove(id);  // the delete's end
  call.join();
  EXPECT_TRUE(absl::IsNotFound(seen)) << seen;
  EXPECT_LT(absl::Now() - removed, absl::Seconds(30)) << "the removal did not wake the call";
}

// ImportSession makes a session whose record may have last changed long
// ago on another server: the import is its use.
TEST(SessionExpiry, AnImportedSessionsIdleTimeStartsAtTheImport) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(40);
  ExportRequest request;
  request.id = id;
  absl::StatusOr<ExportedStream> exported = env.sessions().Export(request);
  ASSERT_TRUE(exported.ok()) << exported.status();
  ASSERT_TRUE(env.sessions().Delete(id).ok());
  absl::StatusOr<MigrationContents> contents = DecodeMigrationStream(exported->bytes);
  ASSERT_TRUE(contents.ok()) << contents.status();
  const absl::Time before_import = AfterNow();
  ASSERT_TRUE(env.sessions().Import(*contents).ok());
  SessionExpiry expiry(&env.sessions(), kTtl);

  EXPECT_EQ(expiry.Sweep(before_import + kTtl), 0) << "not idle since the source's last change";
  EXPECT_EQ(expiry.Sweep(AfterNow() + kTtl), 1);
}

TEST(SessionExpiry, AForkAndACheckpointOfAnExpiredSessionKeepTheirPagesAcrossARestart) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string source = env.MakeSession(40);  // 3 pages
  auto branches = env.sessions().Fork(source, 1, {}, {});
  ASSERT_TRUE(branches.ok());
  const std::string branch = (*branches)[0]->id;
  int64_t bytes = 0;
  auto checkpoint = env.sessions().Snapshot(source, "cp", &bytes);
  ASSERT_TRUE(checkpoint.ok());
  const int64_t pages = env.store().Stats().pages;
  const absl::Time between = AfterNow();
  Use(env, branch);
  SessionExpiry expiry(&env.sessions(), kTtl);

  ASSERT_EQ(expiry.Sweep(between + kTtl), 1);
  EXPECT_TRUE(absl::IsNotFound(env.sessions().Get(source, false).status()));
  EXPECT_EQ(env.store().Stats().pages, pages) << "the branch and the checkpoint reference them";
  env.Reopen();
  auto b = env.sessions().Acquire(branch);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->kv->length(), 40);
  env.sessions().Release(*b);
  auto restored = env.sessions().RestoreCheckpoint(checkpoint->id(), {});
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ((*restored)->kv->length(), 40);
}

TEST(SessionExpiry, AfterARestartIdleTimeCountsFromTheRecordsLastWriteAndReadsDoNotCount) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(10);
  const absl::Time written = absl::FromUnixMicros(env.sessions().Get(id, false)->update_time_us);
  env.Reopen();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE(env.sessions().Get(id, true).ok());  // a GetSession
  SessionExpiry expiry(&env.sessions(), kTtl);

  EXPECT_EQ(expiry.Sweep(written + kTtl), 0) << "idle exactly the TTL: not yet";
  EXPECT_EQ(expiry.Sweep(written + kTtl + absl::Microseconds(1)), 1)
      << "not the reload's time nor the read's: the record's";
}

TEST(SessionExpiry, ASessionWhoseDeleteTheStoreRefusesStaysForTheNextSweep) {
  KVS_REQUIRE_SHARED_MODEL();
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  ServiceTestEnv env(/*max_pages=*/64, /*page_tokens=*/16, StoreOn(fs));
  const std::string id = env.MakeSession(20);
  SessionExpiry expiry(&env.sessions(), kTtl);
  const absl::Time later = AfterNow() + kTtl;

  fs->FailWrites(FaultInjectionFileSystem::Fault::kIoError);
  EXPECT_EQ(expiry.Sweep(later), 0);
  auto info = env.sessions().Get(id, false);
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->busy);
  fs->Heal();
  EXPECT_EQ(expiry.Sweep(later), 1) << "the failed attempt did not count as a use";
  EXPECT_TRUE(absl::IsNotFound(env.store().GetSession(id).status()));
}

TEST(SessionExpiry, AnotherModelsStoredSessionsAreLeftForTheServerThatCanRunThem) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(10);
  SessionManager other_model(env.model(), &env.pool(), &env.store(), std::string(32, '0'), env.limits());
  ASSERT_TRUE(other_model.LoadFromStore().ok());
  SessionExpiry expiry(&other_model, kTtl);

  EXPECT_EQ(expiry.Sweep(absl::Now() + 10 * kTtl), 0);
  EXPECT_TRUE(env.store().GetSession(id).ok());
}

TEST(SessionExpiry, SweepsRunAnEighthOfTheTtlApartWithinATenthOfASecondAndAMinute) {
  EXPECT_EQ(SessionExpiry::SweepInterval(absl::Seconds(8)), absl::Seconds(1));
  EXPECT_EQ(SessionExpiry::SweepInterval(absl::Milliseconds(10)), absl::Milliseconds(100));
  EXPECT_EQ(SessionExpiry::SweepInterval(absl::Hours(720)), absl::Seconds(60));
}

TEST(SessionExpiry, OnceStartedItExpiresAnIdleSessionOnItsOwn) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(10);
  SessionExpiry expiry(&env.sessions(), absl::Milliseconds(300));
  expiry.Start();
  const absl::Time until = absl::Now() + absl::Seconds(20);
  while (env.sessions().session_count() > 0 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(env.sessions().session_count(), 0);
  EXPECT_EQ(expiry.expired_count(), 1);
  EXPECT_TRUE(absl::IsNotFound(env.store().GetSession(id).status()));
}

}  // namespace
}  // namespace kvs
