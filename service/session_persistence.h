// SessionPersistence: moves a session's KV between the page pool and the
// store: writes a record with the pages the store lacks (encoded from RAM),
// and loads a stored session's pages back into the pool.
//
// Contract: a write is one atomic store mutation (SessionStore): on error
// nothing is written. A load either yields the whole KV or nothing (every
// page it took is given back): DATA_LOSS when a page is missing or fails
// its checksum, RESOURCE_EXHAUSTED when the pool has no room even after
// the room-maker evicted idle sessions.
//
// Ownership and threads: borrows the pool, store, record context and
// room-maker. Thread-safe (the store and pool are); the sessions it reads
// must be held busy by the caller.
#ifndef KVSESSION_SERVICE_SESSION_PERSISTENCE_H_
#define KVSESSION_SERVICE_SESSION_PERSISTENCE_H_

#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/kv_sequence.h"
#include "cache/page_pool.h"
#include "cache/session_store.h"
#include "service/page_owners.h"
#include "service/record_convert.h"
#include "service/session.h"
#include "service/session_kv.h"

namespace kvs {

class SessionPersistence {
 public:
  // The KV it loads is the session owner's (`owners`: PagePool's owners).
  SessionPersistence(PagePool* pool, SessionStore* store, const RecordContext* context,
                     KvRoomMaker* room, PageOwners* owners)
      : pool_(pool), store_(store), context_(context), room_(room), owners_(owners) {}

  // Writes `record` (built from `session`), encoding the pages the store
  // lacks from the session's resident KV (DATA_LOSS if one is not in RAM).
  absl::Status Write(const SessionRecord& record, const Session& session) const;
  // Writes fork branches' records in one batch; records[i] is branches[i]'s.
  absl::Status WriteBranches(std::span<const SessionRecord> records,
                             std::span<const std::shared_ptr<Session>> branches) const;
  // The session's stored KV (persisted_kv_length positions), in the pool.
  // Full pages already in RAM under their key are shared, not read.
  // RESOURCE_EXHAUSTED at once, naming both sizes, when the KV takes more
  // pages than the whole pool holds (a session from a server with more KV
  // memory). Room is made (MakeRoom, which may evict idle sessions) before
  // any page is taken, and the pages are then taken all at once
  // (PagePool::TakePages): when there is no room, or others took it since
  // the check, RESOURCE_EXHAUSTED with no page taken or given back.
  //
  // `room_seen`, if not null, tells a caller that may wait for room: when
  // the load failed for want of pool room that others may give back, it is
  // set to the pool's room_given_back() as of before the load looked, so
  // PagePool::AwaitRoomGivenBack(room_seen) returns as soon as anyone gave
  // room back since (at once if they already did). Otherwise -1: nothing
  // to wait for.
  absl::StatusOr<KvSequence> LoadKv(const Session& session, int64_t* room_seen = nullptr) const;

 private:
  // Page i as parts: a full page's payload is its pool page (the session
  // is acquired, so the page does not change while the store writes it).
  absl::StatusOr<PageEncoding> EncodeResidentPage(const Session& session, int kv_length, int i) const;

  PagePool* const pool_;
  SessionStore* const store_;
  const RecordContext* const context_;
  KvRoomMaker* const room_;
  PageOwners* const owners_;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_SESSION_PERSISTENCE_H_
