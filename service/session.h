// Session: one conversation held by the server: its tokens, its KV cache
// (when resident in RAM), its sampling defaults and random-generator state,
// and what is needed to persist it.
//
// Invariants (while the session is idle):
//   - kv->length() <= tokens.size() - 1: the KV covers every token but the
//     last (the last token is fed by the next Generate's first step, which
//     yields the logits it samples from). A cancelled Append may leave the
//     KV further behind; the next job catches it up.
//   - page_hashes (set while resident) holds the chain hash of every full
//     page of the KV (the prefix cache and the store key pages by them).
//
// Ownership and locking: sessions are shared_ptrs owned by the
// SessionRegistry. Three owners, three rules:
//   - registry fields (busy, dirty, last_used_us, times, labels, sampling,
//     version, the persisted_* and unsaved_* fields) are guarded by the
//     registry's mutex;
//   - `tokens` is written only by the holder of the busy session, under
//     `tokens_mu`; readers that do not hold the session copy it under
//     `tokens_mu` (the holder itself reads without the lock);
//   - `kv`, `page_hashes` and `rng` belong to whoever holds the session
//     busy (a job in the engine, or a manager operation). `kv` is set or
//     reset only under the registry's mutex (load, eviction), so readers
//     under that mutex may test resident() and, when idle, read the table.
//     While it is held shared (Fork, Snapshot) nothing evicts it and only
//     its readers load it, one at a time under `persist_mu`: under that
//     lock a reader may test resident() too.
#ifndef KVSESSION_SERVICE_SESSION_H_
#define KVSESSION_SERVICE_SESSION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "cache/kv_sequence.h"
#include "cache/page_hash.h"
#include "cache/page_hash_chain.h"
#include "model/sampler.h"
#include "service/auth/principal.h"
#include "service/chat_state.h"
#include "service/context_policy.h"
#include "service/job_handle.h"

namespace kvs {

struct Session {
  std::string id;
  std::vector<int32_t> tokens;
  mutable absl::Mutex tokens_mu;  // see "Ownership and locking" above
  std::optional<KvSequence> kv;   // set when resident
  std::optional<PageHashChain> page_hashes;  // set with `kv`
  SamplingParams sampling;  // defaults for Generate
  SequenceRng rng;
  std::map<std::string, std::string> labels;
  int64_t create_time_us = 0;
  int64_t update_time_us = 0;
  std::string parent_session_id;
  std::string checkpoint_id;
  // The tenant the session belongs to (service/auth/principal.h): set
  // before the session is registered and never changed after, so any
  // thread may read it without a lock. Forks and restores inherit it.
  std::string owner = kDefaultTenant;
  // The page hash chain starts unsalted whatever the owner (created under
  // --shared-prefix-cache; cache/page_hash.h ChainStart). Set with `owner`,
  // never changed after; forks inherit it.
  bool shared_prefix_chain = false;
  // The conversation this session holds (service/chat_state.h); like
  // `tokens`: written by the holder under tokens_mu.
  ChatState chat;
  // Context overflow (context_policy.h): set at creation (or copied by a
  // fork / read from the record); the slide state below belongs to the
  // busy holder, like `kv`.
  ContextPolicy context_policy = ContextPolicy::kError;
  int keep_tokens = 0;
  int64_t tokens_dropped = 0;             // by slides, over the session's life
  std::optional<ChainSalt> slide_salt;    // the page hash chain's, once slid

  // Persistence: the record as last written (version 0 = never written),
  // and the KV length and page hashes it holds, for loading on first use.
  uint64_t version = 0;
  int persisted_kv_length = 0;
  std::vector<PageHash> persisted_page_hashes;
  int64_t persisted_record_bytes = 0;  // the record's encoded size (tenant quotas)
  // Set for sessions found in the store that this server cannot run (made
  // with another model or KV geometry): every use answers this.
  absl::Status foreign;

  // Access (session_registry.h): one exclusive holder (Generate, Append,
  // Delete, a new session's Create), or any number of readers (Fork,
  // Snapshot), never both.
  bool busy = false;
  int readers = 0;
  const char* holder = "";          // what holds it exclusively, for messages
  int64_t held_since_us = 0;
  uint64_t times_taken = 0;         // exclusive takes so far (waits in the registry watch it)
  std::shared_ptr<JobHandle> job;   // the exclusive holder's engine job, if any
  // Serialises the readers' writes of this session's record (a Fork draws
  // branch seeds from the session's generator and stores its new state).
  absl::Mutex persist_mu;
  // Pages of the KV as of the last release, for describing a busy session.
  int described_pages = 0;
  int described_shared_pages = 0;
  // The last write of this session's state failed: RAM is newer than disk
  // (never evicted; the next persist retries).
  bool dirty = false;
  // With `dirty`, for the store estimates of the next Snapshot or Fork
  // (tenant_usage.h), which write what the failed write did not: that
  // write's record size, and what its pages may add to the store (its pages
  // past those the last stored record holds, at a full page's encoded size
  // each; record_convert.h UnstoredPageBytes). 0 when not dirty.
  int64_t unsaved_record_bytes = 0;
  int64_t unsaved_page_bytes = 0;
  // Held by the idle expiry (session_expiry.h) to be deleted: a call that
  // finds it so waits for the delete to end (then NOT_FOUND) instead of
  // answering ABORTED.
  bool expiring = false;
  // When a call last held it (Acquire or AcquireShared, and their
  // release), or, for one not used since it was loaded, its record's
  // update time: evicting idle KV (least recently used first) and idle
  // expiry (session_expiry.h) read it.
  int64_t last_used_us = 0;

  bool resident() const { return kv.has_value(); }
  int kv_length() const { return kv ? kv->length() : persisted_kv_length; }

  // Holder only: appends under tokens_mu, so concurrent readers see a
  // consistent list.
  void AppendTokens(std::span<const int32_t> more) {
    absl::MutexLock lock(&tokens_mu);
    tokens.insert(tokens.end(), more.begin(), more.end());
  }
  // Holder only: room for `more` tokens, so appends never reallocate.
  void ReserveTokens(size_t more) {
    absl::MutexLock lock(&tokens_mu);
    tokens.reserve(tokens.size() + more);
  }
  // Any thread: a copy of the token list, or its length.
  std::vector<int32_t> CopyTokens() const {
    absl::MutexLock lock(&tokens_mu);
    return tokens;
  }
  // Holder only: the chat state, under tokens_mu.
  void SetChat(const ChatState& state) {
    absl::MutexLock lock(&tokens_mu);
    chat = state;
  }
  // Any thread.
  ChatState CopyChat() const {
    absl::MutexLock lock(&tokens_mu);
    return chat;
  }
  int TokenCount() const {
    absl::MutexLock lock(&tokens_mu);
    return static_cast<int>(tokens.size());
  }
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_SESSION_H_
