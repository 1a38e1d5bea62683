// SessionPersistence::LoadKv against a real pool and RocksDB store, with
// a room-maker the test controls: what a load takes when the room it was
// told of is gone by the time it takes its pages.
#include "service/session_persistence.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "service/record_convert.h"
#include "service/service_test_env.h"

namespace kvs {
namespace {

// Says there is room, after taking `steal` pages itself on its first call:
// another load that took the room between this load's check and its take.
class RoomTakenAfterTheCheck : public KvRoomMaker {
 public:
  RoomTakenAfterTheCheck(PagePool* pool, int steal) : pool_(pool), steal_(steal) {}
  ~RoomTakenAfterTheCheck() override {
    for (PageId p : taken_) pool_->Release(p);
  }
  bool MakeRoom(int64_t) override {
    ++calls_;
    for (; steal_ > 0; --steal_) {
      absl::StatusOr<PageId> p = pool_->Allocate();
      EXPECT_TRUE(p.ok()) << p.status();
      if (p.ok()) taken_.push_back(*p);
    }
    return true;
  }
  int calls() const { return calls_; }

 private:
  PagePool* const pool_;
  int steal_;
  int calls_ = 0;
  std::vector<PageId> taken_;
};

// The stored session `id` as a restart sees it: its record, no KV.
std::shared_ptr<Session> StoredSession(ServiceTestEnv& env, const std::string& id) {
  absl::StatusOr<SessionRecord> record = env.store().GetSession(id);
  EXPECT_TRUE(record.ok()) << record.status();
  return SessionFromRecord(*record, env.sessions().record_context());
}

TEST(SessionPersistence, ALoadBeatenToTheRoomAfterItsCheckTakesNoPageAndGivesNoneBack) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env(/*max_pages=*/4);
  const std::string id = env.MakeSession(40);  // 3 pages, the last partly filled
  env.Reopen();                                // its pages free (two still cached)
  std::shared_ptr<Session> s = StoredSession(env, id);
  ASSERT_EQ(s->persisted_page_hashes.size(), 3u);
  RoomTakenAfterTheCheck room(&env.pool(), /*steal=*/2);  // 2 of 4 pages left
  SessionPersistence persistence(&env.pool(), &env.store(), &env.sessions().record_context(), &room,
                                 env.sessions().page_owners());

  const int64_t room_before = env.pool().room_given_back();
  int64_t room_seen = -1;
  absl::StatusOr<KvSequence> kv = persistence.LoadKv(*s, &room_seen);
  EXPECT_TRUE(absl::IsResourceExhausted(kv.status())) << kv.status();
  EXPECT_EQ(room.calls(), 2) << "it made room again once before giving up";
  EXPECT_EQ(env.pool().Stats().pages_in_use, 2) << "only the thief's pages";
  EXPECT_EQ(env.pool().room_given_back(), room_before) << "the load took pages and gave them back";
  EXPECT_EQ(room_seen, room_before);
}

// Evicts as a SessionManager would: first `first` (the only other holder
// of the load's shared pages), then `others`' pages until `pages` are free.
class EvictingRoomMaker : public KvRoomMaker {
 public:
  EvictingRoomMaker(PagePool* pool, std::optional<KvSequence>* first, std::vector<PageId>* others)
      : pool_(pool), first_(first), others_(others) {}
  bool MakeRoom(int64_t pages) override {
    asked.push_back(pages);
    if (first_->has_value()) {
      first_->reset();
    } else {
      while (Free() < pages && !others_->empty()) {
        pool_->Release(others_->back());
        others_->pop_back();
      }
    }
    return Free() >= pages;
  }
  std::vector<int64_t> asked;

 private:
  int64_t Free() const {
    const PagePoolStats st = pool_->Stats();
    return st.max_pages - st.pages_in_use - st.pages_reserved;
  }
  PagePool* const pool_;
  std::optional<KvSequence>* const first_;
  std::vector<PageId>* const others_;
};

// A load counts the full pages another sequence holds as taking no room,
// but its own MakeRoom may evict that holder: the pages then take room as
// they are revived, and the load asks for that room before it gives up.
TEST(SessionPersistence, ALoadWhosePagesLostTheirOtherHolderAsksForTheRoomTheyNowTake) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env(/*max_pages=*/4);
  const std::string prefix = env.MakeSession(32);  // 2 full pages
  env.Reopen();
  const std::string longer = env.MakeSession(40);  // the same 2, and a partial third
  env.Reopen();
  std::shared_ptr<Session> s = StoredSession(env, longer);
  std::optional<KvSequence> holder;
  std::vector<PageId> others;
  EvictingRoomMaker room(&env.pool(), &holder, &others);
  SessionPersistence persistence(&env.pool(), &env.store(), &env.sessions().record_context(), &room,
                                 env.sessions().page_owners());
  absl::StatusOr<KvSequence> held = persistence.LoadKv(*StoredSession(env, prefix));
  ASSERT_TRUE(held.ok()) << held.status();
  holder.emplace(*std::move(held));
  for (int i = 0; i < 2; ++i) others.push_back(*env.pool().Allocate());  // the pool is full
  ASSERT_EQ(env.pool().Stats().pages_in_use, 4);
  room.asked.clear();

  absl::StatusOr<KvSequence> kv = persistence.LoadKv(*s);
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_EQ(kv->num_pages(), 3);
  EXPECT_EQ(room.asked, (std::vector<int64_t>{1, 3})) << "1 counted at first, 3 taken";
  EXPECT_EQ(others.size(), 1u) << "one other page evicted for the third";
}

TEST(SessionPersistence, ALoadSharesTheFullPagesAnotherSessionHoldsAndReadsTheRest) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(40);  // 3 pages
  env.Reopen();
  std::shared_ptr<Session> s = StoredSession(env, id);
  RoomTakenAfterTheCheck room(&env.pool(), /*steal=*/0);
  SessionPersistence persistence(&env.pool(), &env.store(), &env.sessions().record_context(), &room,
                                 env.sessions().page_owners());
  absl::StatusOr<KvSequence> first = persistence.LoadKv(*s);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<KvSequence> second = persistence.LoadKv(*s);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(first->num_pages(), 3);
  ASSERT_EQ(second->num_pages(), 3);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(first->page_table()[i], second->page_table()[i]) << "full page " << i << " shared";
  }
  EXPECT_NE(first->page_table()[2], second->page_table()[2]) << "the partial page is each one's own";
  EXPECT_EQ(env.pool().Stats().pages_in_use, 4);
}

}  // namespace
}  // namespace kvs
