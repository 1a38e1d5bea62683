#include "service/session_manager.h"

#include <openssl/rand.h>

#include <algorithm>
#include <optional>

#include "absl/base/internal/raw_logging.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/route_key.h"
#include "service/session_rewind.h"
#include "service/task_executor.h"

namespace kvs {
namespace {

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

// Whether two session records reference the same pages.
bool SamePages(const SessionRecord& a, const SessionRecord& b) {
  return a.kv_length() == b.kv_length() && a.page_hashes_size() == b.page_hashes_size() &&
         std::equal(a.page_hashes().begin(), a.page_hashes().end(), b.page_hashes().begin());
}

}  // namespace

SessionManager::SessionManager(const Model& model, PagePool* pool, SessionStore* store,
                               std::string model_fingerprint, const ServiceLimits& limits)
    : model_(model),
      pool_(pool),
      store_(store),
      limits_(limits),
      context_{std::move(model_fingerprint), model.config().name, pool->geometry()},
      registry_(pool, limits.max_sessions),
      persistence_(pool, store, &context_, this, &page_owners_) {}

std::string SessionManager::NewId(const char* prefix, std::string_view route_key) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    ABSL_RAW_LOG(FATAL, "RAND_bytes failed: no secure randomness for session ids");
  }
  const std::string hex =
      absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(bytes), sizeof(bytes)));
  if (route_key.empty()) return absl::StrCat(prefix, hex);
  return absl::StrCat(prefix, std::string(route_key), ".", hex);
}

absl::Status SessionManager::LoadFromStore() {
  std::vector<SessionRecord> sessions;
  std::vector<CheckpointRecord> checkpoints;
  if (absl::Status s = store_->LoadAll(&sessions, &checkpoints); !s.ok()) return s;
  for (const SessionRecord& r : sessions) {
    longest_stored_session_tokens_ = std::max<int64_t>(longest_stored_session_tokens_, r.tokens_size());
    registry_.AddLoaded(SessionFromRecord(r, context_));
  }
  for (const CheckpointRecord& c : checkpoints) registry_.AddCheckpoint(c);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::CreateAcquired(
    const SamplingParams& sampling, const std::map<std::string, std::string>& labels,
    const std::string& owner, std::string_view route_key) {
  auto s = std::make_shared<Session>();
  s->id = NewId("ses_", route_key);
  s->owner = owner;
  s->shared_prefix_chain = shared_prefix_cache_;
  s->kv.emplace(pool_, page_owners_.Of(owner));
  s->page_hashes.emplace(context_.model_fingerprint, context_.geometry,
                         ChainStart(s->owner, s->shared_prefix_chain));
  s->sampling = sampling;
  s->rng = SequenceRng(sampling.seed);
  s->labels = labels;
  s->create_time_us = s->update_time_us = s->last_used_us = NowMicros();
  s->busy = true;
  s->holder = "CreateSession";
  s->held_since_us = s->create_time_us;
  const Tokenizer& tok = model_.tokenizer();
  if (tok.add_bos() && tok.bos_id() >= 0) s->tokens.push_back(tok.bos_id());
  if (absl::Status st = registry_.Add({&s, 1}); !st.ok()) return st;
  return s;
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::Acquire(const std::string& id,
                                                                 const char* what,
                                                                 absl::Time deadline) {
  absl::StatusOr<std::shared_ptr<Session>> acquired = registry_.Acquire(id, what, deadline);
  if (!acquired.ok()) return acquired.status();
  std::shared_ptr<Session> s = *std::move(acquired);
  if (!s->resident()) {
    absl::StatusOr<KvSequence> kv = LoadKvWaitingForRoom(*s, deadline);
    if (!kv.ok()) {
      registry_.Release(*s);
      return kv.status();
    }
    registry_.SetKv(*s, *std::move(kv));
    AdoptStoredHashes(*s);
  }
  return s;
}

absl::StatusOr<SessionRecord> SessionManager::Persist(const std::shared_ptr<Session>& s) {
  SessionRecord record = registry_.UnderLock([&] {
    s->update_time_us = NowMicros();
    return BuildSessionRecord(*s, context_);
  });
  absl::Status st = persistence_.Write(record, *s);
  if (st.ok()) {
    registry_.MarkPersisted(record, *s);
  } else {
    registry_.UnderLock([&] {
      s->dirty = true;
      s->unsaved_record_bytes = static_cast<int64_t>(record.ByteSizeLong());
      s->unsaved_page_bytes = UnstoredPageBytes(record, *s, context_.geometry);
    });
  }
  if (!st.ok()) return st;
  return record;
}

absl::Status SessionManager::PersistAndRelease(const std::shared_ptr<Session>& s,
                                               SessionInfo* described) {
  absl::StatusOr<SessionRecord> record = Persist(s);
  registry_.Release(*s, described);
  return record.status();
}

void SessionManager::AdoptStoredHashes(Session& s) const {
  // The store verified these when it loaded the record: adopted, not rehashed.
  const int full = s.persisted_kv_length / context_.geometry.page_tokens;
  s.page_hashes.emplace(context_.model_fingerprint, context_.geometry, ChainStart(s.owner, s.shared_prefix_chain));
  const std::span<const PageHash> stored = std::span<const PageHash>(s.persisted_page_hashes).first(full);
  // A slid session's chain holds its salt wherever it falls, among the
  // adopted pages too: a later cut below the pages after it, or another
  // slide (SessionKv::SaltPage), chains from it as before the reload.
  const int before_salt = s.slide_salt ? std::min(s.slide_salt->page, full) : full;
  s.page_hashes->Adopt(stored.first(static_cast<size_t>(before_salt)));
  if (s.slide_salt) s.page_hashes->SetSalt(*s.slide_salt);
  s.page_hashes->Adopt(stored.subspan(static_cast<size_t>(before_salt)));
}

absl::Status SessionManager::RetryLoadWhileNoRoom(absl::Time deadline,
                                                  absl::FunctionRef<absl::Status(int64_t* room_seen)> try_load) {
  // No KV room now (running calls hold it): wait for them to give some
  // back, within the call's deadline, like a call waiting in the engine's
  // queue. Woken when room is given back in the pool (a page freed, the
  // reserve shrunk, a session become idle and clean, which LoadKv's
  // MakeRoom can then evict); a load that finds no room takes none, and
  // `room_seen` counts what came while it looked. A KV larger than the
  // whole pool is refused at once (room_seen -1).
  int64_t room_seen = -1;
  absl::Status st = try_load(&room_seen);
  std::optional<BlockingWait> waiting;  // other io tasks run meanwhile
  while (absl::IsResourceExhausted(st) && room_seen >= 0 && absl::Now() < deadline) {
    if (!waiting) waiting.emplace();
    if (!pool_->AwaitRoomGivenBack(room_seen, deadline)) break;
    room_seen = -1;
    st = try_load(&room_seen);
  }
  return st;
}

absl::StatusOr<KvSequence> SessionManager::LoadKvWaitingForRoom(const Session& s, absl::Time deadline) {
  absl::StatusOr<KvSequence> kv = absl::UnknownError("not loaded");
  RetryLoadWhileNoRoom(deadline, [&](int64_t* room_seen) {
    kv = persistence_.LoadKv(s, room_seen);
    return kv.status();
  }).IgnoreError();  // the last try's status is kv's
  return kv;
}

absl::Status SessionManager::LoadForReaders(Session& s, absl::Time deadline) {
  // One load per session: its readers load under its persist_mu, and wait
  // for room without it (the session's other readers take it).
  return RetryLoadWhileNoRoom(deadline, [&](int64_t* room_seen) {
    absl::MutexLock persist(&s.persist_mu);
    if (s.resident()) return absl::OkStatus();  // readers keep it so
    absl::StatusOr<KvSequence> kv = persistence_.LoadKv(s, room_seen);
    if (!kv.ok()) return kv.status();
    registry_.SetKv(s, *std::move(kv));
    AdoptStoredHashes(s);
    return absl::OkStatus();
  });
}

absl::Status SessionManager::CheckMergedLabels(const std::map<std::string, std::string>& source,
                                               const std::map<std::string, std::string>& added) const {
  size_t merged = source.size();
  for (const auto& [k, v] : added) merged += !source.contains(k);
  if (merged > static_cast<size_t>(limits_.max_labels)) {
    return absl::InvalidArgumentError(absl::StrCat("a branch would have ", merged,
                                                   " labels (the source's and the request's); at most ",
                                                   limits_.max_labels));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::shared_ptr<Session>>> SessionManager::Fork(
    const std::string& id, int count, const std::vector<uint64_t>& seeds,
    const std::map<std::string, std::string>& labels, absl::Time deadline,
    std::optional<int> at_length, const std::function<absl::Status()>& reserve) {
  absl::StatusOr<std::shared_ptr<Session>> parent = registry_.AcquireShared(id, "Fork", deadline);
  if (!parent.ok()) return parent.status();
  Session& p = **parent;
  // Readers leave the tokens and labels as they are.
  const int length = at_length.value_or(static_cast<int>(p.tokens.size()));
  absl::Status st = CheckCutLength("at_length", length, static_cast<int>(p.tokens.size()),
                                   MinSessionLength(model_.tokenizer()));
  if (st.ok()) st = CheckMergedLabels(p.labels, labels);
  // Before the load: a refused Fork loads nothing. Held shared, the source
  // has no writer, so its record stays as the reservation saw it (another
  // reader's write of it only saves its unsaved pages).
  if (st.ok() && reserve) st = reserve();
  if (st.ok()) st = LoadForReaders(p, deadline);
  std::vector<std::shared_ptr<Session>> branches;
  if (st.ok()) {
    // Readers of one session write its record one at a time.
    absl::MutexLock persist(&p.persist_mu);
    std::vector<SessionRecord> records;
    SequenceRng parent_rng = p.rng;  // committed only if the write succeeds
    registry_.UnderLock([&] {
      const int64_t now = NowMicros();
      for (int i = 0; i < count; ++i) {
        auto b = std::make_shared<Session>();
        b->id = NewId("ses_", RouteKeyOf(p.id));
        CopyPrefix(p, length, b.get());  // the whole source unless at_length
        b->context_policy = p.context_policy;
        b->keep_tokens = p.keep_tokens;
        b->tokens_dropped = p.tokens_dropped;
        b->sampling = p.sampling;
        b->sampling.seed = i < static_cast<int>(seeds.size()) ? seeds[i] : parent_rng.Next();
        b->rng = SequenceRng(b->sampling.seed);
        b->labels = p.labels;
        for (const auto& [k, v] : labels) b->labels[k] = v;
        b->create_time_us = b->update_time_us = b->last_used_us = now;
        b->parent_session_id = p.id;
        b->owner = p.owner;
        b->busy = true;
        b->holder = "Fork";
        records.push_back(BuildSessionRecord(*b, context_));
        branches.push_back(std::move(b));
      }
      // The source's record with its generator advanced, in the same batch.
      p.update_time_us = now;
      SessionRecord source = BuildSessionRecord(p, context_);
      source.clear_rng_state();
      for (uint64_t w : parent_rng.state()) source.add_rng_state(w);
      records.push_back(std::move(source));
    });
    st = registry_.Add(branches);
    if (st.ok()) {
      std::vector<std::shared_ptr<Session>> writers = branches;
      writers.push_back(*parent);
      st = persistence_.WriteBranches(records, writers);
      if (!st.ok()) {
        for (const auto& b : branches) registry_.Remove(b->id);
      } else {
        for (size_t i = 0; i < branches.size(); ++i) registry_.MarkPersisted(records[i], *branches[i]);
        registry_.MarkPersisted(records.back(), p);
        registry_.UnderLock([&] {
          const int64_t released = NowMicros();
          for (const auto& b : branches) {
            b->busy = false;
            b->holder = "";
            b->last_used_us = released;
          }
          p.rng = parent_rng;
        });
        registry_.NoteIdle(branches);
      }
    }
  }
  registry_.ReleaseShared(p);
  if (!st.ok()) return st;
  return branches;
}

absl::StatusOr<CheckpointRecord> SessionManager::Snapshot(const std::string& id,
                                                          const std::string& name,
                                                          int64_t* bytes_written,
                                                          absl::Time deadline,
                                                          const std::function<absl::Status()>& reserve) {
  absl::StatusOr<std::shared_ptr<Session>> s = registry_.AcquireShared(id, "Snapshot", deadline);
  if (!s.ok()) return s.status();
  if (absl::Status st = CheckCheckpointRoom((*s)->owner); !st.ok()) {
    registry_.ReleaseShared(**s);
    return st;
  }
  absl::StatusOr<CheckpointRecord> c;
  {
    absl::MutexLock persist(&(*s)->persist_mu);
    // The checkpoint is a copy of the session's stored record: rewrite it
    // (its pages are already stored unless the last write failed).
    absl::Status reserved = reserve ? reserve() : absl::OkStatus();
    absl::StatusOr<SessionRecord> record = reserved.ok() ? Persist(*s) : reserved;
    if (!record.ok()) {
      c = record.status();
    } else {
      CheckpointRecord cp;
      cp.set_id(NewId("ckpt_", RouteKeyOf(id)));
      cp.set_name(name);
      cp.set_create_time_us(NowMicros());
      *cp.mutable_session() = *std::move(record);
      WriteStats stats;
      if (absl::Status st = store_->PutCheckpoint(cp, &stats); !st.ok()) {
        c = st;
      } else {
        if (bytes_written != nullptr) *bytes_written = stats.bytes_written;
        registry_.AddCheckpoint(cp);
        c = std::move(cp);
      }
    }
  }
  registry_.ReleaseShared(**s);
  return c;
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::RestoreCheckpoint(
    const std::string& checkpoint_id, const std::map<std::string, std::string>& labels, absl::Time deadline) {
  absl::StatusOr<CheckpointRecord> checkpoint = registry_.GetCheckpoint(checkpoint_id);
  if (!checkpoint.ok()) return checkpoint.status();
  const std::string owner = CheckpointOwner(*checkpoint);
  if (absl::Status st = registry_.CheckRoom(1, &owner); !st.ok()) return st;
  SessionRecord record = checkpoint->session();
  const std::string source = record.id();
  record.set_id(NewId("ses_", RouteKeyOf(checkpoint_id)));
  record.set_parent_session_id(source);
  record.set_checkpoint_id(checkpoint_id);
  record.set_create_time_us(NowMicros());
  record.set_update_time_us(record.create_time_us());
  record.set_version(0);
  if (!labels.empty()) {
    record.mutable_labels()->clear();
    for (const auto& [k, v] : labels) (*record.mutable_labels())[k] = v;
  }
  std::shared_ptr<Session> s = SessionFromRecord(record, context_);
  if (!s->foreign.ok()) return s->foreign;
  // Whether the checkpoint loaded is still the one listed under its id.
  const auto still_listed = [&] {
    absl::StatusOr<CheckpointRecord> now = registry_.GetCheckpoint(checkpoint_id);
    return now.ok() && SamePages(now->session(), checkpoint->session());
  };
  const auto deleted = [&] {
    return absl::NotFoundError(absl::StrCat("checkpoint '", checkpoint_id, "' was deleted"));
  };
  // Load the KV now: a restore that cannot read its pages fails here. The
  // session is not registered yet, so nobody else can see it.
  absl::StatusOr<KvSequence> kv = LoadKvWaitingForRoom(*s, deadline);
  if (!kv.ok()) {
    // A DeleteCheckpoint may have dropped the pages meanwhile.
    if (!still_listed()) return deleted();
    return kv.status();
  }
  s->kv.emplace(*std::move(kv));
  AdoptStoredHashes(*s);
  record.set_version(1);
  if (after_restore_load_for_test_) after_restore_load_for_test_();
  {
    // The checkpoint is still there as the record is written (a
    // DeleteCheckpoint waits; restores share the lock), so the store holds
    // every page the record references and the write adds the record
    // alone, as ReserveRestore reserved. Deleted since the load (or
    // deleted and imported again, other pages under the same id): nothing
    // is written.
    absl::ReaderMutexLock restore_write(&checkpoint_restore_write_mu_);
    if (!still_listed()) return deleted();
    if (absl::Status st = persistence_.Write(record, *s); !st.ok()) return st;
  }
  // As written (version 1): the size the store and a restart see. Not in
  // the registry yet, so the plain MarkPersisted.
  MarkPersisted(record, s.get());
  s->last_used_us = NowMicros();
  // The limits again, with the add: another call may have taken the last
  // slot since CheckRoom (the load and the write run unlocked). Then the
  // written record goes again.
  if (absl::Status added = registry_.Add({&s, 1}); !added.ok()) {
    store_->DeleteSession(record.id()).IgnoreError();
    return added;
  }
  return s;
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::RestoreSession(const std::string& id,
                                                                        absl::Time deadline) {
  absl::StatusOr<std::shared_ptr<Session>> s = Acquire(id, "Restore", deadline);
  if (!s.ok()) return s.status();
  registry_.Release(**s);
  return s;
}

absl::Status SessionManager::Delete(const std::string& id, absl::Time deadline) {
  absl::StatusOr<std::shared_ptr<Session>> s = registry_.Acquire(id, "Delete", deadline);
  if (!s.ok()) return s.status();
  return DeleteHeld(*s, /*taken_as_use=*/true);
}

absl::StatusOr<bool> SessionManager::DeleteIfUnusedSince(const std::string& id, absl::Time cutoff) {
  absl::StatusOr<std::shared_ptr<Session>> s = registry_.TakeIfUnusedSince(id, absl::ToUnixMicros(cutoff), "Expiry");
  if (!s.ok()) return false;  // gone, held or used meanwhile: the normal race
  if (absl::Status st = DeleteHeld(*s, /*taken_as_use=*/false); !st.ok()) return st;
  return true;
}

absl::Status SessionManager::DeleteHeld(const std::shared_ptr<Session>& s, bool taken_as_use) {
  absl::Status st = store_->DeleteSession(s->id);
  if (absl::IsNotFound(st)) st = absl::OkStatus();  // created, never persisted
  if (!st.ok()) {
    taken_as_use ? registry_.Release(*s) : registry_.ReturnUnused(*s);
    return st;
  }
  registry_.Remove(s->id);
  return absl::OkStatus();
}

absl::Status SessionManager::CheckCheckpointRoom(const std::string& owner) const {
  return registry_.CheckpointRoom(owner, limits_.max_checkpoints);
}

absl::Status SessionManager::DeleteCheckpoint(const std::string& id) {
  // Out of the registry before its pages can go, so a Restore that finds
  // them gone also finds the checkpoint gone; and not while a restored
  // session's record is being written (RestoreCheckpoint).
  absl::WriterMutexLock restore_write(&checkpoint_restore_write_mu_);
  absl::StatusOr<CheckpointRecord> record = registry_.GetCheckpoint(id);
  if (!record.ok()) return record.status();
  registry_.RemoveCheckpoint(id);
  if (absl::Status st = store_->DeleteCheckpoint(id); !st.ok() && !absl::IsNotFound(st)) {
    registry_.AddCheckpoint(*record);
    return st;
  }
  return absl::OkStatus();
}

bool SessionManager::MakeRoom(int64_t pages_wanted) {
  auto enough = [&] {
    PagePoolStats st = pool_->Stats();
    return st.max_pages - st.pages_in_use - st.pages_reserved >= pages_wanted;
  };
  if (enough()) return true;
  for (const std::shared_ptr<Session>& s : registry_.EvictionCandidates()) {
    if (registry_.EvictIfIdle(*s) && enough()) return true;
  }
  return enough();
}

}  // namespace kvs
