#include "service/session_manager.h"

#include <openssl/rand.h>

#include <algorithm>

#include "absl/base/internal/raw_logging.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cache/page_codec.h"

namespace kvs {
namespace {

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

SamplingRecord ToRecord(const SamplingParams& p) {
  SamplingRecord r;
  r.set_temperature(p.temperature);
  r.set_top_k(p.top_k);
  r.set_top_p(p.top_p);
  r.set_min_p(p.min_p);
  r.set_repetition_penalty(p.repetition_penalty);
  r.set_repetition_last_n(p.repetition_last_n);
  r.set_seed(p.seed);
  return r;
}

SamplingParams FromRecord(const SamplingRecord& r) {
  SamplingParams p;
  p.temperature = r.temperature();
  p.top_k = r.top_k();
  p.top_p = r.top_p();
  p.min_p = r.min_p();
  p.repetition_penalty = r.repetition_penalty();
  p.repetition_last_n = r.repetition_last_n();
  p.seed = r.seed();
  return p;
}

PageHash HashFromBytes(const std::string& b) {
  return PageHash::FromBytes(b).value_or(PageHash{});  // the store checks record hashes
}

std::string ShortFingerprint(const std::string& fp) {
  return absl::BytesToHexString(fp.substr(0, 6));
}

}  // namespace

SessionManager::SessionManager(const Model& model, PagePool* pool, SnapshotStore* store,
                               std::string model_fingerprint, const ServiceLimits& limits)
    : model_(model),
      pool_(pool),
      store_(store),
      fingerprint_(std::move(model_fingerprint)),
      limits_(limits),
      geometry_(pool->geometry()) {}

uint64_t SessionManager::RandomSeed() {
  uint64_t seed = 0;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&seed), sizeof(seed)) != 1) {
    ABSL_RAW_LOG(FATAL, "RAND_bytes failed");
  }
  return seed;
}

std::string SessionManager::NewId(const char* prefix) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    ABSL_RAW_LOG(FATAL, "RAND_bytes failed: no secure randomness for session ids");
  }
  return absl::StrCat(prefix, absl::BytesToHexString(
                                  absl::string_view(reinterpret_cast<char*>(bytes), sizeof(bytes))));
}

absl::Status SessionManager::LoadFromStore() {
  std::vector<SessionRecord> sessions;
  std::vector<CheckpointRecord> checkpoints;
  if (absl::Status s = store_->LoadAll(&sessions, &checkpoints); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  for (const SessionRecord& r : sessions) sessions_[r.id()] = FromRecord(r);
  for (CheckpointRecord& c : checkpoints) checkpoints_[c.id()] = std::move(c);
  return absl::OkStatus();
}

std::shared_ptr<Session> SessionManager::FromRecord(const SessionRecord& r) const {
  auto s = std::make_shared<Session>();
  s->id = r.id();
  s->tokens.assign(r.tokens().begin(), r.tokens().end());
  s->sampling = kvs::FromRecord(r.sampling());
  if (r.rng_state_size() == 4) {
    s->rng.set_state({r.rng_state(0), r.rng_state(1), r.rng_state(2), r.rng_state(3)});
  }
  s->labels = std::map<std::string, std::string>(r.labels().begin(), r.labels().end());
  s->create_time_us = r.create_time_us();
  s->update_time_us = r.update_time_us();
  s->parent_session_id = r.parent_session_id();
  s->checkpoint_id = r.checkpoint_id();
  s->version = r.version();
  s->persisted_kv_length = r.kv_length();
  for (const std::string& h : r.page_hashes()) s->persisted_page_hashes.push_back(HashFromBytes(h));
  if (r.model_fingerprint() != fingerprint_) {
    s->foreign = absl::FailedPreconditionError(absl::StrCat(
        "session ", r.id(), " was created with another model (fingerprint ",
        ShortFingerprint(r.model_fingerprint()), "...; this server runs ", model_.config().name,
        ", fingerprint ", ShortFingerprint(fingerprint_), "...)"));
  } else if (absl::StatusOr<KvGeometry> g = FromGeometryRecord(r.geometry()); !g.ok() || !(*g == geometry_)) {
    s->foreign = absl::FailedPreconditionError(absl::StrCat(
        "session ", r.id(), " was stored with KV pages of ", r.geometry().page_tokens(),
        " tokens, dtype ", r.geometry().dtype() == 0 ? "f32" : "f16", "; this server uses ",
        geometry_.page_tokens, " tokens, ", KvDtypeName(geometry_.dtype)));
  }
  return s;
}

SessionRecord SessionManager::BuildRecord(const Session& s) {
  SessionRecord r;
  r.set_id(s.id);
  r.set_model_fingerprint(fingerprint_);
  *r.mutable_geometry() = ToGeometryRecord(geometry_);
  r.mutable_tokens()->Add(s.tokens.begin(), s.tokens.end());
  *r.mutable_sampling() = ToRecord(s.sampling);
  for (uint64_t w : s.rng.state()) r.add_rng_state(w);
  for (const auto& [k, v] : s.labels) (*r.mutable_labels())[k] = v;
  r.set_create_time_us(s.create_time_us);
  r.set_update_time_us(s.update_time_us);
  r.set_parent_session_id(s.parent_session_id);
  r.set_checkpoint_id(s.checkpoint_id);
  r.set_version(s.version + 1);
  if (!s.kv) {
    r.set_kv_length(s.persisted_kv_length);
    for (const PageHash& h : s.persisted_page_hashes) {
      r.add_page_hashes(std::string(h.bytes.begin(), h.bytes.end()));
    }
    return r;
  }
  const int kv_length = s.kv->length();
  const int t = geometry_.page_tokens;
  r.set_kv_length(kv_length);
  const int full = kv_length / t;
  for (int i = 0; i < full; ++i) {
    const PageHash& h = s.full_page_hashes[i];
    r.add_page_hashes(std::string(h.bytes.begin(), h.bytes.end()));
  }
  if (kv_length % t != 0) {
    const PageHash prev = full > 0 ? s.full_page_hashes[full - 1] : PageHash{};
    const PageHash tail = ChainPageHash(
        prev, fingerprint_, geometry_,
        std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(full) * t, kv_length - full * t));
    r.add_page_hashes(std::string(tail.bytes.begin(), tail.bytes.end()));
  }
  return r;
}

absl::Status SessionManager::CheckCapacity(int more) const {
  if (static_cast<int64_t>(sessions_.size()) + more > limits_.max_sessions) {
    return absl::ResourceExhaustedError(absl::StrCat("session limit reached: the server holds ",
                                                     sessions_.size(), " of at most ",
                                                     limits_.max_sessions, " sessions (--max-sessions)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::CreateAcquired(
    const SamplingParams& sampling, const std::map<std::string, std::string>& labels) {
  auto s = std::make_shared<Session>();
  s->id = NewId("ses_");
  s->kv.emplace(pool_);
  s->sampling = sampling;
  s->rng = SequenceRng(sampling.seed);
  s->labels = labels;
  s->create_time_us = s->update_time_us = s->last_used_us = NowMicros();
  s->busy = true;
  const Tokenizer& tok = model_.tokenizer();
  if (tok.add_bos() && tok.bos_id() >= 0) s->tokens.push_back(tok.bos_id());
  absl::MutexLock lock(&mu_);
  if (absl::Status st = CheckCapacity(1); !st.ok()) return st;
  sessions_[s->id] = s;
  return s;
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::Acquire(const std::string& id) {
  std::shared_ptr<Session> s;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return absl::NotFoundError(absl::StrCat("no session '", id, "'"));
    s = it->second;
    if (!s->foreign.ok()) return s->foreign;
    if (s->busy) {
      return absl::FailedPreconditionError(absl::StrCat(
          "session ", id, " is busy: another Generate or Append is running on it"));
    }
    s->busy = true;
    s->last_used_us = NowMicros();
  }
  if (!s->kv) {
    if (absl::Status st = LoadKv(*s); !st.ok()) {
      Release(s);
      return st;
    }
  }
  return s;
}

absl::Status SessionManager::LoadKv(Session& s) {
  const int t = geometry_.page_tokens;
  const int kv_length = s.persisted_kv_length;
  const int n_pages = (kv_length + t - 1) / t;
  if (static_cast<int>(s.persisted_page_hashes.size()) != n_pages) {
    return absl::DataLossError(absl::StrCat("session ", s.id, " record lists ",
                                            s.persisted_page_hashes.size(), " pages for ",
                                            kv_length, " KV positions"));
  }
  std::vector<PageId> pages;
  auto give_back = [&] {
    for (PageId p : pages) pool_->Release(p);
  };
  for (int i = 0; i < n_pages; ++i) {
    const PageHash& hash = s.persisted_page_hashes[i];
    const int expected_tokens = PageTokensAt(geometry_, kv_length, i);
    const bool full = expected_tokens == t;
    if (full) {
      if (std::optional<PageId> cached = pool_->LookupKey(hash.bytes)) {
        pages.push_back(*cached);
        continue;
      }
    }
    absl::StatusOr<PageId> page = pool_->Allocate();
    if (!page.ok() && EvictIdle(n_pages - i)) page = pool_->Allocate();
    if (!page.ok()) {
      give_back();
      return page.status();
    }
    pages.push_back(*page);
    absl::Status read = store_->ReadPage(hash, geometry_, expected_tokens, pool_->data(*page));
    if (!read.ok()) {
      give_back();
      return absl::DataLossError(absl::StrCat("session ", s.id, ": KV page ", i, " (", hash.hex(),
                                              ") is corrupt or missing: ", read.message()));
    }
    if (full) pool_->SetKey(*page, hash.bytes);
  }
  KvSequence kv(pool_);
  kv.Adopt(std::move(pages), kv_length);
  s.kv.emplace(std::move(kv));
  s.full_page_hashes.assign(s.persisted_page_hashes.begin(),
                            s.persisted_page_hashes.begin() + kv_length / t);
  return absl::OkStatus();
}

absl::StatusOr<SessionRecord> SessionManager::Persist(const std::shared_ptr<Session>& s) {
  SessionRecord record;
  {
    absl::MutexLock lock(&mu_);
    s->update_time_us = NowMicros();
    record = BuildRecord(*s);
  }
  absl::Status st = store_->PutSession(record, [&](int i) -> absl::StatusOr<std::string> {
    if (!s->kv || i >= s->kv->num_pages()) {
      return absl::DataLossError(absl::StrCat("session ", s->id, ": page ", i, " is not in RAM"));
    }
    return EncodePage(geometry_, pool_->data(s->kv->page_table()[i]),
                      PageTokensAt(geometry_, record.kv_length(), i));
  });
  absl::MutexLock lock(&mu_);
  if (!st.ok()) {
    s->dirty = true;
    return st;
  }
  s->version = record.version();
  s->persisted_kv_length = record.kv_length();
  s->persisted_page_hashes.clear();
  for (const std::string& h : record.page_hashes()) s->persisted_page_hashes.push_back(HashFromBytes(h));
  s->dirty = false;
  return record;
}

absl::Status SessionManager::PersistAndRelease(const std::shared_ptr<Session>& s) {
  absl::StatusOr<SessionRecord> record = Persist(s);
  Release(s);
  return record.status();
}

void SessionManager::Release(const std::shared_ptr<Session>& s) {
  absl::MutexLock lock(&mu_);
  s->busy = false;
  s->last_used_us = NowMicros();
}

void SessionManager::Discard(const std::shared_ptr<Session>& s) {
  absl::MutexLock lock(&mu_);
  sessions_.erase(s->id);
  s->kv.reset();
  s->busy = false;
}

void SessionManager::ReserveTokens(Session& s, size_t more) {
  absl::MutexLock lock(&mu_);
  s.tokens.reserve(s.tokens.size() + more);
}

void SessionManager::AppendTokens(Session& s, std::span<const int32_t> tokens) {
  absl::MutexLock lock(&mu_);
  s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
}

absl::StatusOr<std::vector<std::shared_ptr<Session>>> SessionManager::Fork(
    const std::string& id, int count, const std::vector<uint64_t>& seeds,
    const std::map<std::string, std::string>& labels) {
  absl::StatusOr<std::shared_ptr<Session>> parent = Acquire(id);
  if (!parent.ok()) return parent.status();
  const std::shared_ptr<Session>& p = *parent;
  std::vector<std::shared_ptr<Session>> branches;
  std::vector<SessionRecord> records;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status st = CheckCapacity(count); !st.ok()) {
      p->busy = false;
      return st;
    }
    const int64_t now = NowMicros();
    for (int i = 0; i < count; ++i) {
      auto b = std::make_shared<Session>();
      b->id = NewId("ses_");
      b->tokens = p->tokens;
      b->kv.emplace(p->kv->Fork());
      b->full_page_hashes = p->full_page_hashes;
      b->sampling = p->sampling;
      // Branch seeds: as given, else fresh random ones (so branches differ
      // from each other; the parent's own random stream is left alone).
      b->sampling.seed = i < static_cast<int>(seeds.size()) ? seeds[i] : RandomSeed();
      b->rng = SequenceRng(b->sampling.seed);
      b->labels = p->labels;
      for (const auto& [k, v] : labels) b->labels[k] = v;
      b->create_time_us = b->update_time_us = b->last_used_us = now;
      b->parent_session_id = p->id;
      b->busy = true;
      records.push_back(BuildRecord(*b));
      branches.push_back(std::move(b));
    }
    for (const auto& b : branches) sessions_[b->id] = b;
  }
  // The parent's pages are already stored (it is persisted whenever idle),
  // so the branches' records only add references.
  absl::Status st = store_->PutSessions(records, [&](int r, int i) -> absl::StatusOr<std::string> {
    return EncodePage(geometry_, pool_->data(branches[r]->kv->page_table()[i]),
                      PageTokensAt(geometry_, records[r].kv_length(), i));
  });
  absl::MutexLock lock(&mu_);
  p->busy = false;
  p->last_used_us = NowMicros();
  if (!st.ok()) {
    for (const auto& b : branches) {
      sessions_.erase(b->id);
      b->kv.reset();
    }
    return st;
  }
  for (size_t i = 0; i < branches.size(); ++i) {
    branches[i]->busy = false;
    branches[i]->version = records[i].version();
    branches[i]->persisted_kv_length = records[i].kv_length();
    for (const std::string& h : records[i].page_hashes()) {
      branches[i]->persisted_page_hashes.push_back(HashFromBytes(h));
    }
  }
  return branches;
}

absl::StatusOr<CheckpointRecord> SessionManager::Snapshot(const std::string& id,
                                                          const std::string& name,
                                                          int64_t* bytes_written) {
  absl::StatusOr<std::shared_ptr<Session>> s = Acquire(id);
  if (!s.ok()) return s.status();
  // The checkpoint is a copy of the session's stored record: rewrite it (its
  // pages are already stored, so only a missing page would be written).
  absl::StatusOr<SessionRecord> record = Persist(*s);
  if (!record.ok()) {
    Release(*s);
    return record.status();
  }
  CheckpointRecord c;
  c.set_id(NewId("ckpt_"));
  c.set_name(name);
  c.set_create_time_us(NowMicros());
  *c.mutable_session() = *std::move(record);
  WriteStats stats;
  // The session stays acquired until the checkpoint holds its pages: an
  // Append or Delete in between would drop pages the record refers to.
  absl::Status put = store_->PutCheckpoint(c, &stats);
  Release(*s);
  if (!put.ok()) return put;
  if (bytes_written != nullptr) *bytes_written = stats.bytes_written;
  absl::MutexLock lock(&mu_);
  checkpoints_[c.id()] = c;
  return c;
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::RestoreCheckpoint(
    const std::string& checkpoint_id, const std::map<std::string, std::string>& labels) {
  SessionRecord record;
  {
    absl::MutexLock lock(&mu_);
    auto it = checkpoints_.find(checkpoint_id);
    if (it == checkpoints_.end()) {
      return absl::NotFoundError(absl::StrCat("no checkpoint '", checkpoint_id, "'"));
    }
    if (absl::Status st = CheckCapacity(1); !st.ok()) return st;
    record = it->second.session();
  }
  const std::string source = record.id();
  record.set_id(NewId("ses_"));
  record.set_parent_session_id(source);
  record.set_checkpoint_id(checkpoint_id);
  record.set_create_time_us(NowMicros());
  record.set_update_time_us(record.create_time_us());
  record.set_version(0);
  if (!labels.empty()) {
    record.mutable_labels()->clear();
    for (const auto& [k, v] : labels) (*record.mutable_labels())[k] = v;
  }
  std::shared_ptr<Session> s = FromRecord(record);
  if (!s->foreign.ok()) return s->foreign;
  s->busy = true;
  // Load the KV now: a restore that cannot read its pages fails here (with
  // NOT_FOUND if a DeleteCheckpoint dropped them meanwhile).
  if (absl::Status st = LoadKv(*s); !st.ok()) {
    absl::MutexLock lock(&mu_);
    if (!checkpoints_.count(checkpoint_id)) {
      return absl::NotFoundError(absl::StrCat("checkpoint '", checkpoint_id, "' was deleted"));
    }
    return st;
  }
  record.set_version(1);
  // The store normally holds every page (the checkpoint refers to them), but
  // a concurrent DeleteCheckpoint may have dropped some since LoadKv: write
  // them back from RAM.
  absl::Status st = store_->PutSession(record, [&](int i) -> absl::StatusOr<std::string> {
    return EncodePage(geometry_, pool_->data(s->kv->page_table()[i]),
                      PageTokensAt(geometry_, record.kv_length(), i));
  });
  if (!st.ok()) return st;
  s->version = 1;
  absl::MutexLock lock(&mu_);
  s->busy = false;
  s->last_used_us = NowMicros();
  sessions_[s->id] = s;
  return s;
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::RestoreSession(const std::string& id) {
  absl::StatusOr<std::shared_ptr<Session>> s = Acquire(id);
  if (!s.ok()) return s.status();
  Release(*s);
  return s;
}

absl::Status SessionManager::Delete(const std::string& id) {
  std::shared_ptr<Session> s;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return absl::NotFoundError(absl::StrCat("no session '", id, "'"));
    s = it->second;
    if (s->busy) {
      return absl::FailedPreconditionError(
          absl::StrCat("session ", id, " is busy: cancel its Generate before deleting it"));
    }
    s->busy = true;
  }
  absl::Status st = store_->DeleteSession(id);
  if (absl::IsNotFound(st)) st = absl::OkStatus();  // created, never persisted
  absl::MutexLock lock(&mu_);
  if (!st.ok()) {
    s->busy = false;
    return st;
  }
  sessions_.erase(id);
  s->kv.reset();
  return absl::OkStatus();
}

absl::Status SessionManager::DeleteCheckpoint(const std::string& id) {
  // Out of the registry before its pages can go, so a Restore that finds
  // them gone also finds the checkpoint gone.
  CheckpointRecord record;
  {
    absl::MutexLock lock(&mu_);
    auto it = checkpoints_.find(id);
    if (it == checkpoints_.end()) return absl::NotFoundError(absl::StrCat("no checkpoint '", id, "'"));
    record = std::move(it->second);
    checkpoints_.erase(it);
  }
  if (absl::Status st = store_->DeleteCheckpoint(id); !st.ok() && !absl::IsNotFound(st)) {
    absl::MutexLock lock(&mu_);
    checkpoints_[id] = std::move(record);
    return st;
  }
  return absl::OkStatus();
}

SessionInfo SessionManager::Describe(const Session& s) const {
  SessionInfo info;
  info.id = s.id;
  info.length = static_cast<int>(s.tokens.size());
  info.sampling = s.sampling;
  info.labels = s.labels;
  info.create_time_us = s.create_time_us;
  info.update_time_us = s.update_time_us;
  info.busy = s.busy;
  info.resident = s.kv.has_value();
  info.parent_session_id = s.parent_session_id;
  info.checkpoint_id = s.checkpoint_id;
  if (s.kv && !s.busy) {
    info.kv_pages = s.kv->num_pages();
    for (PageId p : s.kv->page_table()) info.kv_pages_shared += pool_->ref_count(p) > 1;
  }
  return info;
}

absl::StatusOr<SessionInfo> SessionManager::Get(const std::string& id, bool include_tokens) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return absl::NotFoundError(absl::StrCat("no session '", id, "'"));
  SessionInfo info = Describe(*it->second);
  if (include_tokens) info.tokens = it->second->tokens;
  return info;
}

std::vector<SessionInfo> SessionManager::List(const std::string& after, int limit) const {
  absl::MutexLock lock(&mu_);
  std::vector<SessionInfo> out;
  for (auto it = sessions_.upper_bound(after); it != sessions_.end() && static_cast<int>(out.size()) < limit; ++it) {
    out.push_back(Describe(*it->second));
  }
  return out;
}

std::vector<CheckpointRecord> SessionManager::ListCheckpoints(const std::string& session_id,
                                                              const std::string& after,
                                                              int limit) const {
  absl::MutexLock lock(&mu_);
  std::vector<CheckpointRecord> out;
  for (auto it = checkpoints_.upper_bound(after); it != checkpoints_.end() && static_cast<int>(out.size()) < limit; ++it) {
    if (session_id.empty() || it->second.session().id() == session_id) out.push_back(it->second);
  }
  return out;
}

void SessionManager::RegisterFullPages(Session& s) {
  const int t = geometry_.page_tokens;
  const int full = s.kv->length() / t;
  while (static_cast<int>(s.full_page_hashes.size()) < full) {
    const int i = static_cast<int>(s.full_page_hashes.size());
    const PageHash prev = i > 0 ? s.full_page_hashes[i - 1] : PageHash{};
    s.full_page_hashes.push_back(ChainPageHash(
        prev, fingerprint_, geometry_, std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(i) * t, t)));
    pool_->SetKey(s.kv->page_table()[i], s.full_page_hashes.back().bytes);
  }
}

int SessionManager::AttachCachedPrefix(Session& s, int max_tokens) {
  const int t = geometry_.page_tokens;
  int attached = 0;
  while (s.kv->length() % t == 0 && max_tokens - attached >= t) {
    const int i = s.kv->length() / t;
    if (static_cast<int>(s.full_page_hashes.size()) != i) break;
    const PageHash prev = i > 0 ? s.full_page_hashes[i - 1] : PageHash{};
    const PageHash hash = ChainPageHash(prev, fingerprint_, geometry_,
                                        std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(i) * t, t));
    std::optional<PageId> page = pool_->LookupKey(hash.bytes);
    if (!page) break;
    s.kv->AppendPage(*page);
    s.full_page_hashes.push_back(hash);
    attached += t;
  }
  return attached;
}

bool SessionManager::EvictIdle(int64_t pages_wanted) {
  auto enough = [&] {
    PagePoolStats st = pool_->Stats();
    return st.max_pages - st.pages_in_use >= pages_wanted;
  };
  if (enough()) return true;
  std::vector<std::shared_ptr<Session>> idle;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, s] : sessions_) {
      if (s->kv && !s->busy && !s->dirty) idle.push_back(s);
    }
  }
  std::sort(idle.begin(), idle.end(),
            [](const auto& a, const auto& b) { return a->last_used_us < b->last_used_us; });
  for (const auto& s : idle) {
    {
      absl::MutexLock lock(&mu_);
      if (s->busy || s->dirty || !s->kv) continue;
      s->kv.reset();  // everything is on disk; comes back on next use
      s->full_page_hashes.clear();
    }
    if (enough()) return true;
  }
  return enough();
}

int SessionManager::session_count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(sessions_.size());
}

int SessionManager::resident_count() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [id, s] : sessions_) n += s->kv.has_value();
  return n;
}

}  // namespace kvs
