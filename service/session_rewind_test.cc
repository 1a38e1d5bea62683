// Truncate and Fork{at_length} at the session level, with a real model,
// page pool and RocksDB store (service_test_env.h): which pages go back to
// the pool, copy-on-write of the page holding the cut, the page-hash chain,
// the record on disk, and errors that change nothing. Generation after a
// cut is compared end to end in tests/rewind_test.cc.
#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "cache/fault_injection_fs.h"
#include "service/service_test_env.h"
#include "service/session_rewind.h"

namespace kvs {
namespace {

std::vector<uint8_t> PageBytes(PagePool& pool, PageId page) {
  const uint8_t* p = pool.data(page);
  return std::vector<uint8_t>(p, p + pool.geometry().page_bytes());
}

// The session's state, read as its holder would.
struct Held {
  std::vector<int32_t> tokens;
  int kv_length = 0;
  std::vector<PageId> table;
  int chain_pages = 0;
};
Held Look(ServiceTestEnv& env, const std::string& id) {
  auto s = env.sessions().Acquire(id);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  Held h{(*s)->tokens, (*s)->kv->length(), (*s)->kv->page_table(), (*s)->page_hashes->size()};
  env.sessions().Release(*s);
  return h;
}

// A persisted session of BOS + `tokens` (a fresh session built from them).
std::string SessionOf(ServiceTestEnv& env, const std::vector<int32_t>& tokens) {
  auto s = env.sessions().CreateAcquired(SamplingParams{}, {});
  EXPECT_TRUE(s.ok()) << s.status();
  env.Prefill(**s, tokens);
  EXPECT_TRUE(env.sessions().PersistAndRelease(*s).ok());
  return (*s)->id;
}

TEST(SessionRewind, TruncateMidPageReleasesLaterPagesAndMatchesAFreshSessionOfThoseTokens) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;  // pages of 16 tokens
  ASSERT_EQ(MinSessionLength(env.model().tokenizer()), 1) << "aidreams adds BOS";
  const std::string id = env.MakeSession(56);  // 57 tokens, KV 56: 4 pages
  const Held before = Look(env, id);
  ASSERT_EQ(before.table.size(), 4u);
  const int64_t in_use = env.pool().Stats().pages_in_use;

  int removed = -1;
  auto info = env.sessions().Truncate(id, 20, &removed);  // KV 19: pages 0 and 1 (3 slots)
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(removed, 37);
  EXPECT_EQ(info->length, 20);
  EXPECT_EQ(info->kv_pages, 2);
  EXPECT_FALSE(info->busy);
  EXPECT_EQ(env.pool().Stats().pages_in_use, in_use - 2) << "pages 2 and 3 went back to the pool";

  const Held after = Look(env, id);
  EXPECT_EQ(after.tokens, std::vector<int32_t>(before.tokens.begin(), before.tokens.begin() + 20));
  EXPECT_EQ(after.kv_length, 19);
  EXPECT_EQ(after.chain_pages, 1) << "the hash of the cut page and later ones are gone";
  EXPECT_EQ(after.table, std::vector<PageId>(before.table.begin(), before.table.begin() + 2))
      << "no page copied by the cut itself";

  // On disk: the same record as a fresh session of those 19 tokens after BOS.
  const std::string fresh = SessionOf(env, std::vector<int32_t>(after.tokens.begin() + 1, after.tokens.end()));
  auto stored = env.store().GetSession(id);
  auto stored_fresh = env.store().GetSession(fresh);
  ASSERT_TRUE(stored.ok() && stored_fresh.ok());
  EXPECT_EQ(stored->tokens_size(), 20);
  EXPECT_EQ(stored->kv_length(), 19);
  ASSERT_EQ(stored->page_hashes_size(), 2);
  EXPECT_EQ(stored->page_hashes(0), stored_fresh->page_hashes(0));
  EXPECT_EQ(stored->page_hashes(1), stored_fresh->page_hashes(1));
  const Held f = Look(env, fresh);
  EXPECT_EQ(PageBytes(env.pool(), after.table[0]), PageBytes(env.pool(), f.table[0]));
}

TEST(SessionRewind, TruncateOnAPageBoundaryKeepsWholePagesAndTheirHashes) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(56);
  auto info = env.sessions().Truncate(id, 33);  // KV 32: exactly 2 pages
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->kv_pages, 2);
  const Held after = Look(env, id);
  EXPECT_EQ(after.kv_length, 32);
  EXPECT_EQ(after.chain_pages, 2);
  EXPECT_EQ(env.store().GetSession(id)->page_hashes_size(), 2);
}

TEST(SessionRewind, ATruncatedSessionWritesIntoACopyOfAPageItsForkShares) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(40);  // KV 40: 3 pages
  auto branches = env.sessions().Fork(id, 1, {}, {});
  ASSERT_TRUE(branches.ok());
  const std::string fork = (*branches)[0]->id;
  const Held fork_before = Look(env, fork);
  std::vector<std::vector<uint8_t>> bytes;
  for (PageId p : fork_before.table) bytes.push_back(PageBytes(env.pool(), p));
  const int64_t in_use = env.pool().Stats().pages_in_use;

  ASSERT_TRUE(env.sessions().Truncate(id, 25).ok());  // KV 24: page 1 is cut mid-way
  EXPECT_EQ(env.pool().Stats().pages_in_use, in_use) << "page 2 stays: the fork holds it";
  // The source writes new tokens where the cut was.
  auto s = env.sessions().Acquire(id);
  ASSERT_TRUE(s.ok());
  env.Prefill(**s, std::vector<int32_t>(20, 7));
  ASSERT_TRUE(env.sessions().PersistAndRelease(*s).ok());

  const Held source = Look(env, id);
  EXPECT_EQ(source.table[0], fork_before.table[0]) << "the whole page before the cut is still shared";
  EXPECT_NE(source.table[1], fork_before.table[1]) << "the cut page was copied before the write";
  const Held fork_after = Look(env, fork);
  EXPECT_EQ(fork_after.tokens, fork_before.tokens);
  EXPECT_EQ(fork_after.table, fork_before.table);
  for (size_t i = 0; i < bytes.size(); ++i) {
    EXPECT_EQ(PageBytes(env.pool(), fork_after.table[i]), bytes[i]) << "fork page " << i;
  }
}

TEST(SessionRewind, ATruncateSurvivesARestartWithItsKv) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(40);
  ASSERT_TRUE(env.sessions().Truncate(id, 21).ok());
  const Held before = Look(env, id);
  const std::vector<uint8_t> page0 = PageBytes(env.pool(), before.table[0]);
  env.Reopen();
  EXPECT_EQ(env.sessions().Get(id, false)->length, 21);
  const Held after = Look(env, id);
  EXPECT_EQ(after.tokens, before.tokens);
  EXPECT_EQ(after.kv_length, 20);
  EXPECT_EQ(after.chain_pages, 1);
  EXPECT_EQ(PageBytes(env.pool(), after.table[0]), page0);
}

TEST(SessionRewind, TruncateToTheCurrentLengthChangesNothing) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(10);
  const uint64_t version = env.store().GetSession(id)->version();
  int removed = -1;
  auto info = env.sessions().Truncate(id, 11, &removed);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(removed, 0);
  EXPECT_EQ(info->length, 11);
  EXPECT_EQ(env.store().GetSession(id)->version(), version) << "nothing written";
}

TEST(SessionRewind, BadTruncatesAnswerTheirCodeAndChangeNothing) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(10);  // 11 tokens
  const Held before = Look(env, id);
  EXPECT_EQ(env.sessions().Truncate("ses_00000000000000000000000000000000", 1).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(env.sessions().Truncate(id, 12).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(env.sessions().Truncate(id, 0).status().code(), absl::StatusCode::kInvalidArgument)
      << "the BOS stays";
  EXPECT_EQ(env.sessions().Truncate(id, -1).status().code(), absl::StatusCode::kInvalidArgument);
  auto held = env.sessions().Acquire(id, "Generate");
  ASSERT_TRUE(held.ok());
  auto busy = env.sessions().Truncate(id, 5);
  EXPECT_EQ(busy.status().code(), absl::StatusCode::kAborted);
  EXPECT_NE(busy.status().message().find("Generate"), std::string::npos) << busy.status();
  env.sessions().Release(*held);
  const Held after = Look(env, id);
  EXPECT_EQ(after.tokens, before.tokens);
  EXPECT_EQ(after.table, before.table);
  EXPECT_EQ(env.store().GetSession(id)->tokens_size(), 11);
}

TEST(SessionRewind, ATruncateWhoseWriteFailsLeavesTheSessionAsItWasInRamAndOnDisk) {
  KVS_REQUIRE_SHARED_MODEL();
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  ServiceTestEnv env(/*max_pages=*/64, /*page_tokens=*/16, StoreOn(fs));
  const std::string id = env.MakeSession(40);
  const Held before = Look(env, id);
  const int64_t in_use = env.pool().Stats().pages_in_use;

  fs->FailWrites(FaultInjectionFileSystem::Fault::kIoError);
  EXPECT_FALSE(env.sessions().Truncate(id, 10).ok());
  fs->Heal();
  const Held after = Look(env, id);
  EXPECT_EQ(after.tokens, before.tokens);
  EXPECT_EQ(after.kv_length, 40);
  EXPECT_EQ(after.table, before.table);
  EXPECT_EQ(after.chain_pages, 2);
  EXPECT_EQ(env.pool().Stats().pages_in_use, in_use);
  EXPECT_FALSE(env.sessions().Get(id, false)->busy);
  EXPECT_EQ(env.store().GetSession(id)->tokens_size(), 41);
  // And the disk back, the same call works.
  EXPECT_TRUE(env.sessions().Truncate(id, 10).ok());
  EXPECT_EQ(env.store().GetSession(id)->tokens_size(), 10);
}

TEST(SessionRewind, ForkAtLengthSharesThePrefixPagesAndLeavesTheSourceWhole) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(56);  // KV 56: 4 pages
  const Held source = Look(env, id);
  const int64_t in_use = env.pool().Stats().pages_in_use;
  auto branches = env.sessions().Fork(id, 2, {}, {{"k", "v"}}, absl::Now(), /*at_length=*/20);
  ASSERT_TRUE(branches.ok()) << branches.status();
  EXPECT_EQ(env.pool().Stats().pages_in_use, in_use) << "no page copied";
  for (const auto& b : *branches) {
    const Held h = Look(env, b->id);
    EXPECT_EQ(h.tokens, std::vector<int32_t>(source.tokens.begin(), source.tokens.begin() + 20));
    EXPECT_EQ(h.kv_length, 19);
    EXPECT_EQ(h.chain_pages, 1);
    EXPECT_EQ(h.table, std::vector<PageId>(source.table.begin(), source.table.begin() + 2));
    auto info = env.sessions().Get(b->id, false);
    EXPECT_EQ(info->parent_session_id, id);
    EXPECT_EQ(info->labels.at("k"), "v");
    auto stored = env.store().GetSession(b->id);
    ASSERT_TRUE(stored.ok());
    EXPECT_EQ(stored->kv_length(), 19);
    EXPECT_EQ(stored->page_hashes_size(), 2);
  }
  const Held source_after = Look(env, id);
  EXPECT_EQ(source_after.tokens, source.tokens);
  EXPECT_EQ(source_after.table, source.table);
}

TEST(SessionRewind, ForkAtALengthOutOfRangeMakesNoBranch) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(10);  // 11 tokens
  EXPECT_EQ(env.sessions().Fork(id, 1, {}, {}, absl::Now(), 12).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(env.sessions().Fork(id, 1, {}, {}, absl::Now(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(env.sessions().session_count(), 1);
  auto whole = env.sessions().Fork(id, 1, {}, {}, absl::Now(), 11);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(Look(env, (*whole)[0]->id).tokens.size(), 11u);
}

TEST(ChatStateForPrefix, TheWholeSessionKeepsItsStateAndAShorterPrefixHasNoOpenTurn) {
  const ChatState open{.started = true, .turn_open = true};
  EXPECT_EQ(ChatStateForPrefix(open, 40, 40, 1), open);
  EXPECT_EQ(ChatStateForPrefix(open, 40, 30, 1), (ChatState{.started = true, .turn_open = false}));
}

TEST(ChatStateForPrefix, APrefixOfTheBosAloneHoldsNoConversationStart) {
  const ChatState started{.started = true, .turn_open = false};
  EXPECT_EQ(ChatStateForPrefix(started, 40, 1, 1), ChatState{});
  EXPECT_EQ(ChatStateForPrefix(started, 40, 0, 1), ChatState{});
  EXPECT_EQ(ChatStateForPrefix(ChatState{}, 40, 20, 1), ChatState{});
}

}  // namespace
}  // namespace kvs
