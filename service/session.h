// Session: one conversation held by the server: its tokens, its KV cache
// (when resident in RAM), its sampling defaults and random-generator state,
// and what is needed to persist it.
//
// Invariants (while the session is idle):
//   - kv->length() <= tokens.size() - 1: the KV covers every token but the
//     last (the last token is fed by the next Generate's first step, which
//     yields the logits it samples from). A cancelled Append may leave the
//     KV further behind; the next job catches it up.
//   - full_page_hashes[i] is the chain hash of KV page i for every full page
//     of the KV (the prefix cache and the store key pages by them).
//
// Ownership and locking: sessions are shared_ptrs owned by the
// SessionManager's registry. Every field is guarded by the manager's mutex,
// except `kv` and the page hashes, which belong to whoever holds the
// session busy (a job in the engine, or a manager operation); an idle
// session's KV may also be evicted by the manager under its mutex.
#ifndef KVSESSION_SERVICE_SESSION_H_
#define KVSESSION_SERVICE_SESSION_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cache/kv_sequence.h"
#include "cache/page_hash.h"
#include "model/sampler.h"

namespace kvs {

struct Session {
  std::string id;
  std::vector<int32_t> tokens;
  std::optional<KvSequence> kv;  // set when resident
  std::vector<PageHash> full_page_hashes;
  SamplingParams sampling;  // defaults for Generate
  SequenceRng rng;
  std::map<std::string, std::string> labels;
  int64_t create_time_us = 0;
  int64_t update_time_us = 0;
  std::string parent_session_id;
  std::string checkpoint_id;

  // Persistence: the record as last written (version 0 = never written),
  // and the KV length and page hashes it holds, for loading on first use.
  uint64_t version = 0;
  int persisted_kv_length = 0;
  std::vector<PageHash> persisted_page_hashes;
  // Set for sessions found in the store that this server cannot run (made
  // with another model or KV geometry): every use answers this.
  absl::Status foreign;

  bool busy = false;
  // The last write of this session's state failed: RAM is newer than disk
  // (never evicted; the next persist retries).
  bool dirty = false;
  int64_t last_used_us = 0;  // for evicting idle KV under memory pressure

  bool resident() const { return kv.has_value(); }
  int kv_length() const { return kv ? kv->length() : persisted_kv_length; }
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_SESSION_H_
