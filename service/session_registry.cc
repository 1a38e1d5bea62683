#include "service/session_registry.h"

#include <algorithm>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "service/auth/tenant_quotas.h"
#include "service/record_convert.h"
#include "service/session_io_metrics.h"
#include "service/task_executor.h"

namespace kvs {

std::string CheckpointOwner(const CheckpointRecord& checkpoint) {
  return RecordOwner(checkpoint.session());
}
namespace {

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

}  // namespace

absl::Status SessionRegistry::TenantRoom(const std::string& owner, int more) const {
  if (!tenant_limit_) return absl::OkStatus();
  const int64_t limit = tenant_limit_(owner);
  const auto it = owned_.find(owner);
  const int64_t have = it == owned_.end() ? 0 : static_cast<int64_t>(it->second.size());
  if (limit > 0 && have + more > limit) return QuotaExceeded(Quota::kSessions, limit);
  return absl::OkStatus();
}

int SessionRegistry::owned_count(const std::string& owner) const {
  absl::MutexLock lock(&mu_);
  const auto it = owned_.find(owner);
  return it == owned_.end() ? 0 : static_cast<int>(it->second.size());
}

absl::Status SessionRegistry::CheckRoom(int more, const std::string* owner) const {
  absl::MutexLock lock(&mu_);
  if (owner != nullptr) {
    if (absl::Status st = TenantRoom(*owner, more); !st.ok()) return st;
  }
  if (static_cast<int64_t>(sessions_.size()) + more > max_sessions_) {
    return absl::ResourceExhaustedError(absl::StrCat("session limit reached: the server holds ",
                                                     sessions_.size(), " of at most ",
                                                     max_sessions_, " sessions (--max-sessions)"));
  }
  return absl::OkStatus();
}

void SessionRegistry::Insert(std::shared_ptr<Session> session) {
  std::shared_ptr<Session>& slot = sessions_[session->id];
  // Ids are unique, so nothing is replaced; if it were, the index follows.
  if (slot != nullptr) {
    Unindex(owned_, slot->owner, static_cast<const Session*>(slot.get()));
    CountStored(*slot, -1);
  }
  owned_[session->owner].insert(session.get());
  CountStored(*session, +1);
  slot = std::move(session);
}

absl::Status SessionRegistry::Add(std::span<const std::shared_ptr<Session>> sessions) {
  absl::MutexLock lock(&mu_);
  if (static_cast<int64_t>(sessions_.size() + sessions.size()) > max_sessions_) {
    return absl::ResourceExhaustedError(absl::StrCat("session limit reached: the server holds ",
                                                     sessions_.size(), " of at most ",
                                                     max_sessions_, " sessions (--max-sessions)"));
  }
  std::map<std::string, int> adding;
  for (const auto& s : sessions) ++adding[s->owner];
  for (const auto& [owner, n] : adding) {
    if (absl::Status st = TenantRoom(owner, n); !st.ok()) return st;
  }
  for (const auto& s : sessions) {
    Insert(s);
    NoteIfEvictable(*s);  // a restored checkpoint comes in idle and resident
  }
  return absl::OkStatus();
}

void SessionRegistry::AddLoaded(std::shared_ptr<Session> session) {
  absl::MutexLock lock(&mu_);
  Insert(std::move(session));
}

void SessionRegistry::Remove(const std::string& id) {
  std::shared_ptr<Session> gone;  // destroyed after unlocking (its KV is released below, locked)
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  gone = std::move(it->second);
  sessions_.erase(it);
  Unindex(owned_, gone->owner, static_cast<const Session*>(gone.get()));
  CountStored(*gone, -1);
  gone->kv.reset();
}

void SessionRegistry::CountStored(const Session& s, int sign) {
  if (s.version == 0) return;  // never written
  const StoredRecordFigures figures{s.persisted_record_bytes, s.persisted_kv_length, s.persisted_page_hashes};
  sign > 0 ? stored_.Add(s.owner, figures) : stored_.Remove(s.owner, figures);
}

void SessionRegistry::CountStored(const CheckpointRecord& c, int sign) {
  std::vector<PageHash> pages;
  pages.reserve(c.session().page_hashes_size());
  for (const std::string& h : c.session().page_hashes()) pages.push_back(PageHash::FromBytes(h).value_or(PageHash{}));
  const StoredRecordFigures figures{static_cast<int64_t>(c.ByteSizeLong()), c.session().kv_length(), pages};
  sign > 0 ? stored_.Add(CheckpointOwner(c), figures) : stored_.Remove(CheckpointOwner(c), figures);
}

int64_t SessionRegistry::stored_bytes(const std::string& owner) const {
  absl::MutexLock lock(&mu_);
  return stored_.bytes(owner);
}

void SessionRegistry::MarkPersisted(const SessionRecord& record, Session& session) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session.id);
  const bool indexed = it != sessions_.end() && it->second.get() == &session;
  if (indexed) CountStored(session, -1);
  kvs::MarkPersisted(record, &session);
  if (indexed) CountStored(session, +1);
  NoteIfEvictable(session);
}

absl::StatusOr<std::shared_ptr<Session>> SessionRegistry::WaitToTake(const std::string& id,
                                                                    const char* what,
                                                                    bool exclusive,
                                                                    absl::Time deadline) {
  // A client's cancel reaches the server as its own event, which may come
  // after the client's next call: a running job gets this long to turn out
  // cancelled before the call is refused.
  const absl::Time grace_end = std::min(deadline, absl::Now() + kCancelGrace);
  std::optional<BlockingWait> waiting;  // other io tasks run meanwhile
  for (;;) {
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return absl::NotFoundError(absl::StrCat("no session '", id, "'"));
    std::shared_ptr<Session> s = it->second;
    if (!s->foreign.ok()) return s->foreign;
    const bool free = !s->busy && (!exclusive || s->readers == 0);
    if (free) return s;
    // Waits that end soon by nature: readers finishing, or a cancelled
    // job's last step and persist. Anything else is a conflict to retry.
    const bool ends_soon = !s->busy || s->expiring || (s->job != nullptr && s->job->cancelled());
    const absl::Time now = absl::Now();
    if ((!ends_soon && now >= grace_end) || now >= deadline) {
      const std::string held =
          s->busy ? absl::StrCat("a ", s->holder, " is running on it (for ",
                                 (absl::ToUnixMicros(now) - s->held_since_us) / 1000, " ms)")
                  : absl::StrCat(s->readers, " Fork or Snapshot call(s) are reading it");
      return absl::AbortedError(absl::StrCat("session ", id, " is busy: ", held, "; retry ", what,
                                             " when it ends"));
    }
    if (!waiting) {
      // Marked outside the registry's mutex (it may start a thread), then
      // looked at again.
      mu_.Unlock();
      waiting.emplace();
      mu_.Lock();
      continue;
    }
    // Woken by whatever ends the wait under this mutex: the session let go
    // (Release, ReleaseShared) or taken out (a delete, an expiry). A
    // running job's cancel flips its flag without this mutex and wakes no
    // one here, and needs not: a job cancelled within the grace ends by a
    // Release, which wakes this wait; at the grace's end the wait looks
    // again, and a job cancelled by then makes it wait on to the deadline.
    // Any change of who holds it counts, not only a release: a session let
    // go and taken at once by another caller makes this one's wait a
    // conflict to answer now.
    const Session* const waited = s.get();
    const bool busy = s->busy;
    const int readers = s->readers;
    const uint64_t times_taken = s->times_taken;
    auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      auto at = sessions_.find(id);
      return at == sessions_.end() || at->second.get() != waited || waited->busy != busy ||
             waited->readers != readers || waited->times_taken != times_taken;
    };
    mu_.AwaitWithDeadline(absl::Condition(&changed), ends_soon ? deadline : grace_end);
  }
}

absl::StatusOr<std::shared_ptr<Session>> SessionRegistry::Acquire(const std::string& id,
                                                                  const char* what,
                                                                  absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::shared_ptr<Session>> s = WaitToTake(id, what, /*exclusive=*/true, deadline);
  if (!s.ok()) return s;
  Session& x = **s;
  x.busy = true;
  ++x.times_taken;
  x.holder = what;
  x.held_since_us = x.last_used_us = NowMicros();
  NoteKvPages(x);
  return s;
}

absl::StatusOr<std::shared_ptr<Session>> SessionRegistry::AcquireShared(const std::string& id,
                                                                        const char* what,
                                                                        absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::shared_ptr<Session>> s = WaitToTake(id, what, /*exclusive=*/false, deadline);
  if (!s.ok()) return s;
  ++(*s)->readers;
  (*s)->last_used_us = NowMicros();
  return s;
}

void SessionRegistry::Release(Session& s, SessionInfo* described) {
  absl::MutexLock lock(&mu_);
  s.busy = false;
  s.holder = "";
  s.job.reset();
  s.last_used_us = NowMicros();
  NoteKvPages(s);
  if (described != nullptr) *described = Describe(s);
  NoteIfEvictable(s);
}

void SessionRegistry::ReleaseShared(Session& s) {
  absl::MutexLock lock(&mu_);
  --s.readers;
  s.last_used_us = NowMicros();
  NoteIfEvictable(s);
}

void SessionRegistry::NoteIdle(std::span<const std::shared_ptr<Session>> sessions) {
  absl::MutexLock lock(&mu_);
  for (const auto& s : sessions) NoteIfEvictable(*s);
}

void SessionRegistry::NoteIfEvictable(const Session& s) const {
  // EvictIfIdle's test.
  if (!s.busy && s.readers == 0 && !s.dirty && s.kv) pool_->NoteRoomMayBeMade();
}

void SessionRegistry::SetJob(Session& s, std::shared_ptr<JobHandle> job) {
  absl::MutexLock lock(&mu_);
  s.job = std::move(job);
}

void SessionRegistry::NoteKvPages(Session& s) const {
  s.described_pages = 0;
  s.described_shared_pages = 0;
  if (!s.kv) return;
  s.described_pages = s.kv->num_pages();
  for (PageId p : s.kv->page_table()) s.described_shared_pages += pool_->ref_count(p) > 1;
}

void SessionRegistry::SetKv(Session& s, KvSequence kv) {
  absl::MutexLock lock(&mu_);
  s.kv.emplace(std::move(kv));
}

bool SessionRegistry::EvictIfIdle(Session& s) {
  absl::MutexLock lock(&mu_);
  if (s.busy || s.readers > 0 || s.dirty || !s.kv) return false;
  if (const SessionIoMetrics* m = GetSessionIoMetrics()) {
    m->evictions->Add();
    m->evicted_bytes->Add(s.kv->num_pages() * m->page_bytes);
  }
  s.kv.reset();  // everything is on disk; comes back on next use
  s.page_hashes.reset();
  return true;
}

std::vector<std::shared_ptr<Session>> SessionRegistry::EvictionCandidates() const {
  // Sort a copy of the keys taken under the lock: last_used_us changes
  // under Acquire, and a comparator must see fixed keys.
  std::vector<std::pair<int64_t, std::shared_ptr<Session>>> idle;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, s] : sessions_) {
      if (s->kv && !s->busy && s->readers == 0 && !s->dirty) idle.emplace_back(s->last_used_us, s);
    }
  }
  std::stable_sort(idle.begin(), idle.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::shared_ptr<Session>> out;
  out.reserve(idle.size());
  for (auto& [t, s] : idle) out.push_back(std::move(s));
  return out;
}

std::vector<std::string> SessionRegistry::UnusedSince(int64_t cutoff_us) const {
  std::vector<std::string> ids;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, s] : sessions_) {
    if (!s->busy && s->readers == 0 && s->foreign.ok() && s->last_used_us < cutoff_us) ids.push_back(id);
  }
  return ids;
}

absl::StatusOr<std::shared_ptr<Session>> SessionRegistry::TakeIfUnusedSince(const std::string& id,
                                                                           int64_t cutoff_us, const char* what) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return absl::NotFoundError(absl::StrCat("no session '", id, "'"));
  Session& s = *it->second;
  if (s.busy || s.readers > 0) return absl::AbortedError(absl::StrCat("session ", id, " is held"));
  if (!s.foreign.ok()) return absl::AbortedError(absl::StrCat("session ", id, " is another model's"));
  if (s.last_used_us >= cutoff_us) {
    return absl::AbortedError(absl::StrCat("session ", id, " was used since the cutoff"));
  }
  s.busy = true;
  ++s.times_taken;
  s.expiring = true;
  s.holder = what;
  s.held_since_us = NowMicros();
  return it->second;
}

void SessionRegistry::ReturnUnused(Session& s) {
  absl::MutexLock lock(&mu_);
  s.busy = false;
  s.expiring = false;
  s.holder = "";
  NoteIfEvictable(s);
}

SessionInfo SessionRegistry::Describe(const Session& s) const {
  SessionInfo info;
  info.id = s.id;
  info.length = s.TokenCount();
  info.sampling = s.sampling;
  info.labels = s.labels;
  info.create_time_us = s.create_time_us;
  info.update_time_us = s.update_time_us;
  info.last_used_us = s.last_used_us;
  info.busy = s.busy;
  info.resident = s.kv.has_value();
  info.parent_session_id = s.parent_session_id;
  info.owner = s.owner;
  info.checkpoint_id = s.checkpoint_id;
  info.chat = s.CopyChat();
  info.context_policy = s.context_policy;
  info.keep_tokens = s.keep_tokens;
  if (s.kv && !s.busy) {
    info.kv_pages = s.kv->num_pages();
    for (PageId p : s.kv->page_table()) info.kv_pages_shared += pool_->ref_count(p) > 1;
  } else if (s.kv) {
    // Held by a job that changes its page table: the counts as of when it
    // was taken.
    info.kv_pages = s.described_pages;
    info.kv_pages_shared = s.described_shared_pages;
  }
  return info;
}

absl::StatusOr<SessionInfo> SessionRegistry::Get(const std::string& id, bool include_tokens) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return absl::NotFoundError(absl::StrCat("no session '", id, "'"));
  SessionInfo info = Describe(*it->second);
  if (include_tokens) info.tokens = it->second->CopyTokens();
  return info;
}

std::vector<SessionInfo> SessionRegistry::List(const std::string& after, int limit,
                                               const std::string* owner) const {
  absl::MutexLock lock(&mu_);
  std::vector<SessionInfo> out;
  for (auto it = sessions_.upper_bound(after);
       it != sessions_.end() && static_cast<int>(out.size()) < limit; ++it) {
    if (owner != nullptr && it->second->owner != *owner) continue;
    out.push_back(Describe(*it->second));
  }
  return out;
}

int SessionRegistry::checkpoint_count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(checkpoints_.size());
}

int SessionRegistry::session_count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(sessions_.size());
}

int SessionRegistry::resident_count() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [id, s] : sessions_) n += s->kv.has_value();
  return n;
}

void SessionRegistry::AddCheckpoint(const CheckpointRecord& checkpoint) {
  absl::MutexLock lock(&mu_);
  if (auto it = checkpoints_.find(checkpoint.id()); it != checkpoints_.end()) {
    Unindex(owned_checkpoints_, CheckpointOwner(it->second), checkpoint.id());  // replaced
    CountStored(it->second, -1);
  }
  checkpoints_.insert_or_assign(checkpoint.id(), checkpoint);
  owned_checkpoints_[CheckpointOwner(checkpoint)].insert(checkpoint.id());
  CountStored(checkpoint, +1);
}

int SessionRegistry::owned_checkpoint_count(const std::string& owner) const {
  absl::MutexLock lock(&mu_);
  const auto it = owned_checkpoints_.find(owner);
  return it == owned_checkpoints_.end() ? 0 : static_cast<int>(it->second.size());
}

absl::Status SessionRegistry::CheckpointRoom(const std::string& owner, int server_limit) const {
  absl::MutexLock lock(&mu_);
  if (static_cast<int64_t>(checkpoints_.size()) >= server_limit) {
    return absl::ResourceExhaustedError(absl::StrCat("the server holds its limit of ", server_limit,
                                                     " checkpoints (--max-checkpoints); delete some first"));
  }
  const int64_t limit = tenant_checkpoint_limit_ ? tenant_checkpoint_limit_(owner) : 0;
  const auto it = owned_checkpoints_.find(owner);
  const int64_t have = it == owned_checkpoints_.end() ? 0 : static_cast<int64_t>(it->second.size());
  if (limit > 0 && have >= limit) return QuotaExceeded(Quota::kCheckpoints, limit);
  return absl::OkStatus();
}

absl::StatusOr<CheckpointRecord> SessionRegistry::GetCheckpoint(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = checkpoints_.find(id);
  if (it == checkpoints_.end()) return absl::NotFoundError(absl::StrCat("no checkpoint '", id, "'"));
  return it->second;
}

bool SessionRegistry::HasCheckpoint(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  return checkpoints_.count(id) > 0;
}

bool SessionRegistry::SessionVisibleTo(const std::string& id, const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  return it != sessions_.end() && it->second->owner == tenant;
}

bool SessionRegistry::CheckpointVisibleTo(const std::string& id, const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = checkpoints_.find(id);
  if (it == checkpoints_.end()) return false;
  const std::string& owner = it->second.session().owner();
  return owner.empty() ? tenant == kDefaultTenant : owner == tenant;
}

void SessionRegistry::RemoveCheckpoint(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = checkpoints_.find(id);
  if (it == checkpoints_.end()) return;
  const std::string owner = CheckpointOwner(it->second);
  CountStored(it->second, -1);
  checkpoints_.erase(it);
  Unindex(owned_checkpoints_, owner, id);
}

std::vector<CheckpointRecord> SessionRegistry::ListCheckpoints(const std::string& session_id,
                                                               const std::string& after, int limit,
                                                               const std::string* owner) const {
  absl::MutexLock lock(&mu_);
  std::vector<CheckpointRecord> out;
  for (auto it = checkpoints_.upper_bound(after);
       it != checkpoints_.end() && static_cast<int>(out.size()) < limit; ++it) {
    if (owner != nullptr && CheckpointOwner(it->second) != *owner) continue;
    if (session_id.empty() || it->second.session().id() == session_id) out.push_back(it->second);
  }
  return out;
}

}  // namespace kvs
