// SessionPersistence::LoadKv against a real pool and RocksDB store, with
// a room-maker the test controls: what a load takes when the room it was
// told of is gone by the time it takes its pages.
#include "service/session_persistence.h"

#include <memory>
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
  SessionPersistence persistence(&env.pool(), &env.store(), &env.sessions().record_context(), &room);

  const int64_t room_before = env.pool().room_given_back();
  int64_t room_seen = -1;
  absl::StatusOr<KvSequence> kv = persistence.LoadKv(*s, &room_seen);
  EXPECT_TRUE(absl::IsResourceExhausted(kv.status())) << kv.status();
  EXPECT_EQ(room.calls(), 2) << "it made room again once before giving up";
  EXPECT_EQ(env.pool().Stats().pages_in_use, 2) << "only the thief's pages";
  EXPECT_EQ(env.pool().room_given_back(), room_before) << "the load took pages and gave them back";
  EXPECT_EQ(room_seen, room_before);
}

TEST(SessionPersistence, ALoadSharesTheFullPagesAnotherSessionHoldsAndReadsTheRest) {
  KVS_REQUIRE_SHARED_MODEL();
  ServiceTestEnv env;
  const std::string id = env.MakeSession(40);  // 3 pages
  env.Reopen();
  std::shared_ptr<Session> s = StoredSession(env, id);
  RoomTakenAfterTheCheck room(&env.pool(), /*steal=*/0);
  SessionPersistence persistence(&env.pool(), &env.store(), &env.sessions().record_context(), &room);
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
