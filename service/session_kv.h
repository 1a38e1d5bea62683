// SessionKv: the engine's handle on one acquired session's KV cache, in the
// manner of vLLM's KVCacheBlocks between its scheduler and KV manager. The
// engine asks it, step by step, to
//   AttachCachedPrefix(n)  take whole pages of the next tokens from the
//                          prefix cache instead of computing them,
//   Reserve(n)             make room for n more positions (evicting idle
//                          sessions' KV under memory pressure),
//   Item(n, logits)        the ForwardItem for those positions,
//   Commit()               after the forward pass: key newly full pages so
//                          the prefix cache (and the store) can find them,
// and appends generated tokens through it. Everything else about the
// session (registry, persistence) stays with the SessionManager.
//
// Page hashes come from the session's PageHashChain (cache/), the one
// hasher the prefix cache, the records and the store share: each full page
// is hashed once, when it fills.
//
// Ownership and threads: borrows the session, the pool and the room-maker;
// the session must be held busy by the caller for the handle's lifetime.
// Not thread-safe: one job uses it from the engine's thread.
#ifndef KVSESSION_SERVICE_SESSION_KV_H_
#define KVSESSION_SERVICE_SESSION_KV_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "cache/kv_geometry.h"
#include "cache/page_hash.h"
#include "cache/page_pool.h"
#include "model/key_rotation.h"
#include "model/kv_slide.h"
#include "model/transformer.h"
#include "service/chat_state.h"
#include "service/record_convert.h"
#include "service/session.h"

namespace kvs {

// Frees KV pages for a job: evicts idle sessions' KV (all persisted) until
// `pages` pages are free. Returns whether they are.
class KvRoomMaker {
 public:
  virtual ~KvRoomMaker() = default;
  virtual bool MakeRoom(int64_t pages) = 0;
};

class SessionKv {
 public:
  // `session` must be resident and held busy by the caller.
  SessionKv(Session* session, PagePool* pool, KvRoomMaker* room);

  Session& session() const { return *session_; }
  int kv_length() const { return session_->kv->length(); }
  // Positions whose KV the next Generate needs but the cache lacks: every
  // token but the last (see the idle invariant in session.h).
  int lag() const;

  // Room for `more` tokens and their page table, so that appending them
  // never allocates in the step loop.
  void ReserveCapacity(size_t more);
  // Attaches cached pages for the next whole pages of missing tokens (at
  // most `max_tokens` tokens); returns how many tokens they cover.
  int AttachCachedPrefix(int max_tokens);
  // Makes positions [kv_length, kv_length + n) writable, evicting idle
  // sessions' KV if the pool is full. RESOURCE_EXHAUSTED when even that
  // does not free enough; on error nothing visible changes.
  absl::Status Reserve(int n);
  // The forward-pass item for the n reserved positions after kv_length.
  ForwardItem Item(int n, Logits logits) const;
  // After a successful forward pass: keys every newly full page; returns
  // the index of the first (session().page_hashes->size() is the end).
  int Commit();
  // Appends a token the job produced (visible to readers at once).
  void Append(int32_t token) { session_->AppendTokens({&token, 1}); }

  // SLIDE (model/kv_slide.h): the KV is full (`max_context` positions);
  // drops the PlanSlide pages after the session's keep_tokens from the KV
  // and the same tokens from the session (visible to readers at once),
  // turns the rest, and restarts the page hash chain from a salt
  // (cache/page_hash.h SlideSalt) at the first moved page, keying the moved
  // full pages under their salted hashes (forks of this session find them;
  // fresh prompts never do). Evicts idle sessions' KV if the pool has no
  // room for the copies. Returns the tokens dropped. Errors (nothing
  // changes): OUT_OF_RANGE (keep_tokens leaves nothing to drop),
  // RESOURCE_EXHAUSTED (no room for the copies even after evicting).
  // A chat session (session.chat.started) given its template's turn
  // markers (`chat`, may be null) slides by whole turns instead
  // (model/turn_slide_plan.h: the kept head is at least keep_tokens and the
  // conversation start, rounded up to a turn start; SlideKvTokens repacks
  // the rest), the salt restarting the chain at the page holding the first
  // dropped token; when no turn boundary allows a drop, by pages as above.
  absl::StatusOr<int> Slide(const KeyRotation& rotation, int max_context,
                            const ChatJob* chat = nullptr);

 private:
  // The page a new slide salt restarts the chain at: `first_changed` (the
  // first page whose KV the slide changes), or the current salt's page if
  // lower (a turn slide's salt at the partial kept page, then a page slide
  // keeping that page): the record holds one salt, so the pages already
  // salted are rehashed under the new one.
  int SaltPage(int first_changed) const;
  // The turn-aligned slide (Slide with a chat job).
  absl::Status SlideTokens(const KeyRotation& rotation, const TokenSlide& slide);

  Session* const session_;
  PagePool* const pool_;
  KvRoomMaker* const room_;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_SESSION_KV_H_
