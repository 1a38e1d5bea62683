// TenantUsage with a real model, page pool and RocksDB store: what counts
// against each quota, and what is refused.
#include "service/tenant_usage.h"

#include <gtest/gtest.h>

#include "cache/fault_injection_fs.h"
#include "cache/page_codec.h"
#include "service/service_test_env.h"
#include "service/tenant_metrics.h"
#include "service/tenant_usage_recount.h"

namespace kvs {
namespace {

// Every tenant's kept figure equals the recount, and TenantUsage shows it.
void ExpectStoreBytesMatchARecount(SessionManager& m, const TenantUsage& usage, const char* after) {
  for (const std::string& tenant : {std::string(kDefaultTenant), std::string("acme")}) {
    const int64_t recount = RecountStoreBytes(m, tenant);
    EXPECT_EQ(m.registry()->stored_bytes(tenant), recount) << tenant << " after " << after;
    EXPECT_EQ(usage.Usage(tenant).store_bytes, recount) << tenant << " after " << after;
  }
}

// Every tenant's kv_bytes (kept by the pool) equals a recount of its
// resident sessions' page tables.
void ExpectKvBytesMatchARecount(SessionManager& m, const TenantUsage& usage, const char* after) {
  const int64_t page_bytes = static_cast<int64_t>(m.pool()->geometry().page_bytes());
  for (const std::string& tenant : {std::string(kDefaultTenant), std::string("acme")}) {
    EXPECT_EQ(usage.Usage(tenant).kv_bytes, RecountKvPages(m, tenant) * page_bytes) << tenant << " after " << after;
  }
}

// Evicts every idle, persisted session's KV.
void EvictAllIdle(SessionManager& m) {
  for (const std::shared_ptr<Session>& s : m.registry()->EvictionCandidates()) m.registry()->EvictIfIdle(*s);
}

TEST(TenantUsage, ForksCountTheirSharedPagesOnceInKvAndStoreBytes) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  TenantQuotas quotas{QuotaLimits{}};
  TenantUsage usage(&env.sessions(), &quotas);
  const std::string id = env.MakeSession(40);  // 40 KV positions: 3 pages
  const KvGeometry& g = env.pool().geometry();
  const TenantUsageFigures before = usage.Usage(kDefaultTenant);
  EXPECT_EQ(before.sessions, 1);
  EXPECT_EQ(before.kv_bytes, 3 * static_cast<int64_t>(g.page_bytes()));
  EXPECT_GT(before.store_bytes, env.store().Stats().page_bytes) << "pages and the record";

  ASSERT_TRUE(env.sessions().Fork(id, 3, {}, {}).ok());
  const TenantUsageFigures after = usage.Usage(kDefaultTenant);
  EXPECT_EQ(after.sessions, 4);
  EXPECT_EQ(after.kv_bytes, before.kv_bytes) << "the branches share the source's pages";
  EXPECT_GT(after.store_bytes, before.store_bytes) << "three more records";
  EXPECT_LT(after.store_bytes - before.store_bytes, static_cast<int64_t>(EncodedPageBytes(g, g.page_tokens)))
      << "but no page is stored twice";
  EXPECT_EQ(usage.Usage("acme").sessions, 0) << "another tenant owns none of them";
}

TEST(TenantUsage, EachTenantCountsOnlyItsOwnSessionsAndCheckpointsAsTheyComeAndGo) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  TenantQuotas quotas{QuotaLimits{}};
  TenantUsage usage(&env.sessions(), &quotas);
  const std::string mine = env.MakeSession(40);  // the default tenant's
  const TenantUsageFigures alone = usage.Usage(kDefaultTenant);
  std::vector<std::string> acme;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::shared_ptr<Session>> s = env.sessions().CreateAcquired({}, {}, "acme");
    ASSERT_TRUE(s.ok()) << s.status();
    env.Prefill(**s, std::vector<int32_t>(20 + 10 * i, 7 + i));
    ASSERT_TRUE(env.sessions().PersistAndRelease(*s).ok());
    acme.push_back((*s)->id);
  }
  absl::StatusOr<CheckpointRecord> checkpoint = env.sessions().Snapshot(acme[0], "", nullptr);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  const TenantUsageFigures both = usage.Usage("acme");
  EXPECT_EQ(both.sessions, 2);
  EXPECT_EQ(both.checkpoints, 1);
  EXPECT_GT(both.kv_bytes, 0);
  EXPECT_GT(both.store_bytes, 0);
  const TenantUsageFigures still = usage.Usage(kDefaultTenant);
  EXPECT_EQ(still.sessions, alone.sessions);
  EXPECT_EQ(still.checkpoints, 0);
  EXPECT_EQ(still.kv_bytes, alone.kv_bytes);
  EXPECT_EQ(still.store_bytes, alone.store_bytes);

  ASSERT_TRUE(env.sessions().DeleteCheckpoint(checkpoint->id()).ok());
  ASSERT_TRUE(env.sessions().Delete(acme[1]).ok());
  const TenantUsageFigures one = usage.Usage("acme");
  EXPECT_EQ(one.sessions, 1);
  EXPECT_EQ(one.checkpoints, 0);
  EXPECT_LT(one.kv_bytes, both.kv_bytes);
  EXPECT_LT(one.store_bytes, both.store_bytes);
  ASSERT_TRUE(env.sessions().Delete(acme[0]).ok());
  const TenantUsageFigures none = usage.Usage("acme");
  EXPECT_EQ(none.sessions, 0);
  EXPECT_EQ(none.kv_bytes, 0);
  EXPECT_EQ(none.store_bytes, 0);
  EXPECT_EQ(usage.Usage(kDefaultTenant).sessions, alone.sessions) << mine;
}

TEST(TenantUsage, AForkPastMaxSessionsMakesNoBranch) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  TenantQuotas quotas{QuotaLimits{.max_sessions = 3}};
  TenantUsage usage(&env.sessions(), &quotas);
  const std::string id = env.MakeSession(5);
  absl::StatusOr<std::vector<std::shared_ptr<Session>>> branches = env.sessions().Fork(id, 3, {}, {});
  EXPECT_EQ(branches.status(), QuotaExceeded(Quota::kSessions, 3));
  EXPECT_EQ(env.sessions().session_count(), 1);
  EXPECT_TRUE(env.sessions().Fork(id, 2, {}, {}).ok());
  EXPECT_EQ(usage.Usage(kDefaultTenant).sessions, 3);
  // Another tenant has its own count.
  absl::StatusOr<std::shared_ptr<Session>> other = env.sessions().CreateAcquired({}, {}, "acme");
  ASSERT_TRUE(other.ok()) << other.status();
  env.sessions().Discard(*other);
}

TEST(TenantUsage, AJobClaimCountsAgainstMaxGeneratesUntilItIsDestroyed) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  TenantQuotas quotas{QuotaLimits{.max_generates = 1}};
  TenantUsage usage(&env.sessions(), &quotas);
  auto a = env.sessions().Acquire(env.MakeSession(5));
  auto b = env.sessions().Acquire(env.MakeSession(5, 50));
  ASSERT_TRUE(a.ok() && b.ok());
  absl::StatusOr<std::shared_ptr<TenantClaim>> first = usage.AdmitJob(**a, 4, true);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(usage.Usage(kDefaultTenant).generates, 1);
  EXPECT_EQ(usage.AdmitJob(**b, 4, true).status(), QuotaExceeded(Quota::kGenerates, 1));
  EXPECT_TRUE(usage.AdmitJob(**b, 4, false).ok()) << "a job that is not a generation";
  first->reset();
  EXPECT_EQ(usage.Usage(kDefaultTenant).generates, 0);
  EXPECT_TRUE(usage.AdmitJob(**b, 4, true).ok());
  env.sessions().Release(*a);
  env.sessions().Release(*b);
}

TEST(TenantUsage, AClaimWhoseReservationsEndedStillCountsAsAGenerateButReservesNoKvOrStore) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  TenantQuotas quotas{QuotaLimits{}};
  TenantUsage usage(&env.sessions(), &quotas);
  const std::string id = env.MakeSession(20);  // 2 pages
  const TenantUsageFigures idle = usage.Usage(kDefaultTenant);
  auto s = env.sessions().Acquire(id);
  ASSERT_TRUE(s.ok());
  const KvGeometry& g = env.pool().geometry();
  absl::StatusOr<std::shared_ptr<TenantClaim>> claim = usage.AdmitJob(**s, 4 * g.page_tokens, true);
  ASSERT_TRUE(claim.ok()) << claim.status();
  const TenantUsageFigures running = usage.Usage(kDefaultTenant);
  EXPECT_EQ(running.generates, 1);
  EXPECT_GT(running.kv_bytes, idle.kv_bytes) << "the pages the job may add";
  EXPECT_GT(running.store_bytes, idle.store_bytes);
  env.sessions().Release(*s);
  (*claim)->EndReservations();
  const TenantUsageFigures ended = usage.Usage(kDefaultTenant);
  EXPECT_EQ(ended.generates, 1) << "until the claim is destroyed";
  EXPECT_EQ(ended.kv_bytes, idle.kv_bytes);
  EXPECT_EQ(ended.store_bytes, idle.store_bytes);
  claim->reset();
  EXPECT_EQ(usage.Usage(kDefaultTenant).generates, 0);
}

TEST(TenantUsage, AJobThatMayWritePastMaxStoreBytesIsRefusedAtAdmission) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  TenantQuotas quotas{QuotaLimits{}};
  TenantUsage unlimited(&env.sessions(), &quotas);
  const std::string id = env.MakeSession(20);
  const int64_t used = unlimited.Usage(kDefaultTenant).store_bytes;
  const KvGeometry& g = env.pool().geometry();
  const int64_t page = static_cast<int64_t>(EncodedPageBytes(g, g.page_tokens));
  TenantQuotas tight{QuotaLimits{.max_store_bytes = used + 3 * page}};
  TenantUsage usage(&env.sessions(), &tight);
  auto s = env.sessions().Acquire(id);
  ASSERT_TRUE(s.ok());
  // 21 tokens + 2: the partial second page is rewritten; fits.
  EXPECT_TRUE(usage.AdmitJob(**s, 2, true).ok());
  // Four more pages may be written: refused before anything runs.
  EXPECT_EQ(usage.AdmitJob(**s, 4 * g.page_tokens, true).status(),
            QuotaExceeded(Quota::kStoreBytes, used + 3 * page));
  env.sessions().Release(*s);
  EXPECT_TRUE(usage.ReserveSnapshot(id).ok());
}

TEST(TenantUsage, AStoreWritesReservationCountsAgainstMaxStoreBytesUntilItsClaimIsDropped) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(20);
  // What a one-branch Fork reserves, seen in the usage while it is held.
  TenantQuotas roomy{QuotaLimits{.max_store_bytes = int64_t{1} << 40}};
  TenantUsage measuring(&env.sessions(), &roomy);
  const int64_t used = measuring.Usage(kDefaultTenant).store_bytes;
  int64_t reserved = 0;
  {
    absl::StatusOr<std::shared_ptr<TenantClaim>> claim = measuring.ReserveFork(id, 1, false, {});
    ASSERT_TRUE(claim.ok()) << claim.status();
    ASSERT_NE(*claim, nullptr);
    reserved = measuring.Usage(kDefaultTenant).store_bytes - used;
  }
  ASSERT_GT(reserved, 0);
  EXPECT_EQ(measuring.Usage(kDefaultTenant).store_bytes, used) << "dropping the claim gives it back";
  {
    // Labels the Fork adds go into every branch's record: reserved too.
    const std::map<std::string, std::string> labels = {{"a", std::string(3000, 'x')}, {"b", std::string(1000, 'y')}};
    absl::StatusOr<std::shared_ptr<TenantClaim>> claim = measuring.ReserveFork(id, 2, false, labels);
    ASSERT_TRUE(claim.ok()) << claim.status();
    EXPECT_GE(measuring.Usage(kDefaultTenant).store_bytes - used, 2 * (reserved + 4002));
  }

  // Room for one such write, not two side by side.
  const int64_t limit = used + reserved + reserved / 2;
  TenantQuotas tight{QuotaLimits{.max_store_bytes = limit}};
  TenantUsage usage(&env.sessions(), &tight);
  absl::StatusOr<std::shared_ptr<TenantClaim>> first = usage.ReserveFork(id, 1, false, {});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(usage.ReserveFork(id, 1, false, {}).status(), QuotaExceeded(Quota::kStoreBytes, limit))
      << "a second Fork while the first has not written";
  EXPECT_EQ(usage.ReserveSnapshot(id).status(), QuotaExceeded(Quota::kStoreBytes, limit));
  first->reset();
  EXPECT_TRUE(usage.ReserveFork(id, 1, false, {}).ok()) << "room again once the first claim is dropped";
  absl::StatusOr<std::shared_ptr<TenantClaim>> unknown = usage.ReserveFork("ses_unknown", 1, false, {});
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_EQ(*unknown, nullptr) << "an unknown session reserves nothing (the Fork answers NOT_FOUND)";
}

// A session whose last write failed holds pages the store lacks; its next
// Snapshot or Fork writes them. Both reserve them (once for all of a
// Fork's branches), so what the Snapshot writes stays within what it
// reserved.
TEST(TenantUsage, ASnapshotOrForkOfASessionWhoseLastWriteFailedReservesThePagesItLeftUnsaved) {
  KVS_REQUIRE_SHARED_MODEL();
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  ServiceTestEnv env(/*max_pages=*/64, /*page_tokens=*/16, StoreOn(fs));
  const KvGeometry& g = env.pool().geometry();
  const int64_t page = static_cast<int64_t>(EncodedPageBytes(g, g.page_tokens));
  const std::string id = env.MakeSession(10);  // 9 KV positions stored: one partial page
  TenantQuotas roomy{QuotaLimits{.max_store_bytes = int64_t{1} << 40}};
  TenantUsage usage(&env.sessions(), &roomy);
  const auto reserved_while_held = [&](const auto& reserve) {
    const int64_t used = usage.Usage(kDefaultTenant).store_bytes;
    absl::StatusOr<std::shared_ptr<TenantClaim>> claim = reserve();
    EXPECT_TRUE(claim.ok()) << claim.status();
    return usage.Usage(kDefaultTenant).store_bytes - used;
  };
  const auto snapshot = [&] { return usage.ReserveSnapshot(id); };
  const auto fork_two = [&] { return usage.ReserveFork(id, 2, false, {}); };
  const int64_t snapshot_clean = reserved_while_held(snapshot);
  const int64_t fork_clean = reserved_while_held(fork_two);

  // 50 more tokens while the disk refuses writes: 59 positions in RAM, four
  // pages, none of them the stored partial page.
  auto s = env.sessions().Acquire(id);
  ASSERT_TRUE(s.ok()) << s.status();
  env.Prefill(**s, std::vector<int32_t>(50, 77));
  fs->FailWrites(FaultInjectionFileSystem::Fault::kIoError);
  ASSERT_FALSE(env.sessions().PersistAndRelease(*s).ok());
  ASSERT_TRUE((*s)->dirty);
  // The pages, plus the 50 tokens' growth of the records.
  const int64_t snapshot_dirty = reserved_while_held(snapshot);
  EXPECT_GE(snapshot_dirty - snapshot_clean, 4 * page);
  EXPECT_LT(snapshot_dirty - snapshot_clean, 5 * page);
  const int64_t fork_dirty = reserved_while_held(fork_two);
  EXPECT_GE(fork_dirty - fork_clean, 4 * page);
  EXPECT_LT(fork_dirty - fork_clean, 5 * page) << "the pages once, not per branch";

  // The disk recovers; the Snapshot writes the pages and a checkpoint.
  fs->Heal();
  const int64_t before = usage.Usage(kDefaultTenant).store_bytes;
  {
    absl::StatusOr<std::shared_ptr<TenantClaim>> claim = usage.ReserveSnapshot(id);
    ASSERT_TRUE(claim.ok()) << claim.status();
    ASSERT_TRUE(env.sessions().Snapshot(id, "", nullptr).ok());
  }
  const int64_t written = usage.Usage(kDefaultTenant).store_bytes - before;
  EXPECT_GT(written, snapshot_clean) << "the unsaved pages were written";
  EXPECT_LE(written, snapshot_dirty) << "within the reservation";
  EXPECT_FALSE((*s)->dirty);
  EXPECT_LT(reserved_while_held(snapshot), page) << "a saved session's Snapshot reserves its record only";

  // Dirty again (40 more tokens); then a Fork of two writes the pages once
  // and two branch records, within what it reserved.
  const int64_t fork_clean_again = reserved_while_held(fork_two);
  auto again = env.sessions().Acquire(id);
  ASSERT_TRUE(again.ok()) << again.status();
  env.Prefill(**again, std::vector<int32_t>(40, 78));
  fs->FailWrites(FaultInjectionFileSystem::Fault::kIoError);
  ASSERT_FALSE(env.sessions().PersistAndRelease(*again).ok());
  fs->Heal();
  const int64_t before_fork = usage.Usage(kDefaultTenant).store_bytes;
  int64_t fork_reserved = 0;
  {
    absl::StatusOr<std::shared_ptr<TenantClaim>> claim = usage.ReserveFork(id, 2, false, {});
    ASSERT_TRUE(claim.ok()) << claim.status();
    fork_reserved = usage.Usage(kDefaultTenant).store_bytes - before_fork;
    ASSERT_TRUE(env.sessions().Fork(id, 2, {}, {}).ok());
  }
  const int64_t fork_written = usage.Usage(kDefaultTenant).store_bytes - before_fork;
  EXPECT_GT(fork_written, fork_clean_again) << "the unsaved pages were written";
  EXPECT_LE(fork_written, fork_reserved) << "within the reservation";
}

TEST(TenantUsage, MetricsShowEachNamedTenantsUsageAndLimits) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  absl::StatusOr<ApiKeyFile> keys = ParseApiKeyFile("acme user " + Sha256Hex("k") + " max_sessions=7\n" +
                                                    "beta user " + Sha256Hex("k2") + "\n");
  ASSERT_TRUE(keys.ok()) << keys.status();
  TenantQuotas quotas(QuotaLimits{}, *keys);
  TenantUsage usage(&env.sessions(), &quotas);
  absl::StatusOr<std::shared_ptr<Session>> s = env.sessions().CreateAcquired({}, {}, "acme");
  ASSERT_TRUE(s.ok());
  metrics::Registry registry;
  RegisterTenantMetrics(&registry, &usage);
  const std::string text = registry.Render();
  EXPECT_NE(text.find("kvsession_tenant_sessions{tenant=\"acme\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kvsession_tenant_sessions{tenant=\"beta\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kvsession_tenant_quota_limit{tenant=\"acme\",quota=\"max_sessions\"} 7\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("kvsession_tenant_generates{tenant=\"acme\"} 0\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("tenant=\"default\""), std::string::npos) << "only the tenants the keys name";
  env.sessions().Discard(*s);
}

TEST(TenantUsage, StoreBytesKeptAsRecordsComeAndGoEqualARecountAfterEveryKindOfWriteAndARestart) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  TenantQuotas quotas{QuotaLimits{}};
  auto usage = std::make_unique<TenantUsage>(&env.sessions(), &quotas);
  const std::string mine = env.MakeSession(40);
  absl::StatusOr<std::shared_ptr<Session>> created = env.sessions().CreateAcquired({}, {}, "acme");
  ASSERT_TRUE(created.ok()) << created.status();
  env.Prefill(**created, std::vector<int32_t>(37, 9));  // BOS + 37: a partial last page
  ASSERT_TRUE(env.sessions().PersistAndRelease(*created).ok());
  const std::string acme = (*created)->id;
  ExpectStoreBytesMatchARecount(env.sessions(), *usage, "creating");
  EXPECT_GT(env.sessions().registry()->stored_bytes("acme"), 0);

  absl::StatusOr<std::vector<std::shared_ptr<Session>>> whole = env.sessions().Fork(mine, 2, {}, {});
  ASSERT_TRUE(whole.ok()) << whole.status();
  absl::StatusOr<std::vector<std::shared_ptr<Session>>> cut =
      env.sessions().Fork(acme, 2, {}, {}, absl::Now(), /*at_length=*/20);
  ASSERT_TRUE(cut.ok()) << cut.status();
  ExpectStoreBytesMatchARecount(env.sessions(), *usage, "forks, whole and cut mid-page");

  absl::StatusOr<CheckpointRecord> checkpoint = env.sessions().Snapshot(acme, "", nullptr);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ExpectStoreBytesMatchARecount(env.sessions(), *usage, "a snapshot");

  absl::StatusOr<std::shared_ptr<Session>> grown = env.sessions().Acquire((*cut)[0]->id, "Append", absl::Now());
  ASSERT_TRUE(grown.ok()) << grown.status();
  env.Prefill(**grown, std::vector<int32_t>(30, 11));
  ASSERT_TRUE(env.sessions().PersistAndRelease(*grown).ok());
  ExpectStoreBytesMatchARecount(env.sessions(), *usage, "a branch growing");

  ASSERT_TRUE(env.sessions().Truncate(mine, 17).ok());
  ExpectStoreBytesMatchARecount(env.sessions(), *usage, "a truncate");
  absl::StatusOr<std::shared_ptr<Session>> restored = env.sessions().RestoreCheckpoint(checkpoint->id(), {});
  ASSERT_TRUE(restored.ok()) << restored.status();
  env.sessions().Release(*restored);
  ExpectStoreBytesMatchARecount(env.sessions(), *usage, "a restore");
  ASSERT_TRUE(env.sessions().DeleteCheckpoint(checkpoint->id()).ok());
  ASSERT_TRUE(env.sessions().Delete((*whole)[1]->id).ok());
  ExpectStoreBytesMatchARecount(env.sessions(), *usage, "deletes");

  const int64_t mine_before = env.sessions().registry()->stored_bytes(kDefaultTenant);
  const int64_t acme_before = env.sessions().registry()->stored_bytes("acme");
  usage.reset();
  env.Reopen();  // a restart: everything comes back from the store
  usage = std::make_unique<TenantUsage>(&env.sessions(), &quotas);
  ExpectStoreBytesMatchARecount(env.sessions(), *usage, "a restart");
  EXPECT_EQ(env.sessions().registry()->stored_bytes(kDefaultTenant), mine_before);
  EXPECT_EQ(env.sessions().registry()->stored_bytes("acme"), acme_before);

  std::vector<std::string> all;
  for (const SessionInfo& info : env.sessions().registry()->List("", 1000, nullptr)) all.push_back(info.id);
  for (const std::string& id : all) ASSERT_TRUE(env.sessions().Delete(id).ok()) << id;
  EXPECT_EQ(env.sessions().registry()->stored_bytes(kDefaultTenant), 0);
  EXPECT_EQ(env.sessions().registry()->stored_bytes("acme"), 0);
}

TEST(TenantUsage, KvBytesKeptByThePoolEqualARecountOfEachTenantsPageTablesAfterEveryKindOfChange) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  SessionManager& m = env.sessions();
  TenantQuotas quotas{QuotaLimits{}};
  TenantUsage usage(&m, &quotas);
  ExpectKvBytesMatchARecount(m, usage, "nothing");
  const std::string mine = env.MakeSession(40);
  absl::StatusOr<std::shared_ptr<Session>> acme = m.CreateAcquired({}, {}, "acme");
  ASSERT_TRUE(acme.ok()) << acme.status();
  env.Prefill(**acme, std::vector<int32_t>(50, 9));
  ExpectKvBytesMatchARecount(m, usage, "a session held while it prefills");
  ASSERT_TRUE(m.PersistAndRelease(*acme).ok());
  const std::string theirs = (*acme)->id;
  ExpectKvBytesMatchARecount(m, usage, "creating");
  EXPECT_GT(usage.Usage("acme").kv_bytes, usage.Usage(kDefaultTenant).kv_bytes) << "50 tokens against 40";

  absl::StatusOr<std::vector<std::shared_ptr<Session>>> branches = m.Fork(theirs, 2, {}, {});
  ASSERT_TRUE(branches.ok()) << branches.status();
  ExpectKvBytesMatchARecount(m, usage, "a fork");
  absl::StatusOr<SessionInfo> cut = m.Truncate((*branches)[0]->id, 20);
  ASSERT_TRUE(cut.ok()) << cut.status();
  ExpectKvBytesMatchARecount(m, usage, "truncating a branch");
  absl::StatusOr<CheckpointRecord> checkpoint = m.Snapshot(mine, "c", nullptr);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EvictAllIdle(m);
  ExpectKvBytesMatchARecount(m, usage, "evicting every idle session");
  EXPECT_EQ(usage.Usage("acme").kv_bytes, 0);
  absl::StatusOr<std::shared_ptr<Session>> back = m.Acquire(theirs);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectKvBytesMatchARecount(m, usage, "loading a session back");
  m.Release(*back);
  absl::StatusOr<std::shared_ptr<Session>> restored = m.RestoreCheckpoint(checkpoint->id(), {});
  ASSERT_TRUE(restored.ok()) << restored.status();
  ExpectKvBytesMatchARecount(m, usage, "restoring a checkpoint");
  ASSERT_TRUE(m.Delete(theirs).ok());
  ASSERT_TRUE(m.Delete(mine).ok());
  ExpectKvBytesMatchARecount(m, usage, "deleting");
}

TEST(TenantUsage, WithASharedPrefixCacheAPageTwoTenantsHoldCountsForEachOfThem) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  SessionManager& m = env.sessions();
  m.SetSharedPrefixCache(true);
  TenantQuotas quotas{QuotaLimits{}};
  TenantUsage usage(&m, &quotas);
  const KvGeometry& g = env.pool().geometry();
  // With BOS, 3 full pages of KV and a partial one (the last token's KV is not computed).
  const std::vector<int32_t> prompt(3 * g.page_tokens + 8, 11);
  const int64_t pages = 4;
  std::string ids[2];
  const char* tenants[2] = {kDefaultTenant, "acme"};
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::shared_ptr<Session>> s = m.CreateAcquired({}, {}, tenants[i]);
    ASSERT_TRUE(s.ok()) << s.status();
    env.Prefill(**s, prompt);
    ASSERT_TRUE(m.PersistAndRelease(*s).ok());
    ids[i] = (*s)->id;
  }
  // acme's session comes back from disk onto the default tenant's pages.
  absl::StatusOr<std::shared_ptr<Session>> s = m.Acquire(ids[1]);
  ASSERT_TRUE(s.ok()) << s.status();
  m.Release(*s);
  EvictAllIdle(m);
  s = m.Acquire(ids[0]);
  ASSERT_TRUE(s.ok()) << s.status();
  m.Release(*s);
  s = m.Acquire(ids[1]);
  ASSERT_TRUE(s.ok()) << s.status();
  m.Release(*s);
  EXPECT_EQ(env.pool().Stats().pages_in_use, 5) << "the tenants share their 3 full pages";
  ExpectKvBytesMatchARecount(m, usage, "sharing");
  EXPECT_EQ(usage.Usage(kDefaultTenant).kv_bytes, pages * static_cast<int64_t>(g.page_bytes()));
  EXPECT_EQ(usage.Usage("acme").kv_bytes, pages * static_cast<int64_t>(g.page_bytes()));
  ASSERT_TRUE(m.Delete(ids[0]).ok());
  ExpectKvBytesMatchARecount(m, usage, "one tenant's session deleted");
  EXPECT_EQ(usage.Usage(kDefaultTenant).kv_bytes, 0);
  EXPECT_EQ(usage.Usage("acme").kv_bytes, pages * static_cast<int64_t>(g.page_bytes()))
      << "the pages acme still holds count for acme alone";
}

TEST(TenantUsage, ARunningJobsPagesCountOnceAsItsSessionGrowsIntoWhatItWasAdmittedFor) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  SessionManager& m = env.sessions();
  TenantQuotas quotas{QuotaLimits{}};
  TenantUsage usage(&m, &quotas);
  const KvGeometry& g = env.pool().geometry();
  const int64_t page_bytes = static_cast<int64_t>(g.page_bytes());
  const std::string id = env.MakeSession(20);  // BOS + 20: 2 pages
  absl::StatusOr<std::shared_ptr<Session>> s = m.Acquire(id);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<std::shared_ptr<TenantClaim>> job = usage.AdmitJob(**s, 3 * g.page_tokens, true);
  ASSERT_TRUE(job.ok()) << job.status();
  // 21 + 48 tokens: 5 pages at most.
  EXPECT_EQ(usage.Usage(kDefaultTenant).kv_bytes, 5 * page_bytes);
  env.Prefill(**s, std::vector<int32_t>(2 * g.page_tokens, 5));
  EXPECT_EQ(RecountKvPages(m, kDefaultTenant), 4) << "the job's session has grown by two pages";
  EXPECT_EQ(usage.Usage(kDefaultTenant).kv_bytes, 5 * page_bytes) << "held, or still to come: counted once";
  absl::StatusOr<std::shared_ptr<Session>> other = m.Acquire(env.MakeSession(5, 40));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(usage.Usage(kDefaultTenant).kv_bytes, 6 * page_bytes) << "another session's page on top";
  m.Release(*other);
  m.Release(*s);
  (*job)->EndReservations();
  EXPECT_EQ(usage.Usage(kDefaultTenant).kv_bytes, 5 * page_bytes) << "what the sessions hold, nothing to come";
}

}  // namespace
}  // namespace kvs
