// Context sliding (SLIDE): how a sequence that reached its context limit
// drops its oldest tokens after a kept prefix and goes on, in the manner of
// llama.cpp's context shift and sliding-window caches.
//
//   before: [ keep pages | dropped pages | remaining pages ... ]
//   after:  [ keep pages | remaining pages, keys turned by -dropped ]
//
// Whole pages only: the kept prefix is keep_tokens rounded UP to a page
// boundary (so the kept pages stay exactly the pages a fresh prefill of
// their tokens computes, shared with other sessions and the prefix cache,
// and every remaining token keeps its slot inside its page), and the
// dropped part is a whole number of pages. The remaining keys are turned by
// the position shift (model/key_rotation.h), so the next token's position
// is the new length. Their values, and the keys' content past RoPE, still
// carry the attention to the dropped tokens: that is the approximation
// context shifting makes, and why their page hashes must change
// (cache/page_hash_chain.h SetSalt).
//
// A chat session slides by whole turns instead (model/turn_slide_plan.h),
// which are not page aligned: SlideKvTokens below repacks the moved rows
// into new pages at their new offsets, with the same key rotation.
//
// Thread safety: pure functions over one sequence, which the caller owns
// (KvSequence is not thread-safe).
#ifndef KVSESSION_MODEL_KV_SLIDE_H_
#define KVSESSION_MODEL_KV_SLIDE_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/kv_sequence.h"
#include "model/key_rotation.h"

namespace kvs {

struct SlidePlan {
  int keep_pages = 0;  // pages [0, keep_pages) stay as they are
  int drop_pages = 0;  // pages [keep_pages, keep_pages + drop_pages) go
};

// The slide a sequence of `kv_length` positions makes when it is full
// (`max_context` positions): keep ceil(keep_tokens / T) pages and drop half
// of the whole pages the context has after them (rounded down, at least
// one; llama.cpp also drops half of what is after n_keep), so a session
// slides once per about half a context of new tokens (a chat session's
// turn-aligned plan: model/turn_slide_plan.h).
// OUT_OF_RANGE when keep_tokens leaves no whole page of the context to
// drop, or kv_length does not cover the pages to drop.
absl::StatusOr<SlidePlan> PlanSlide(int kv_length, int max_context, int keep_tokens,
                                    int page_tokens);

// Applies `plan` to `kv`: releases the dropped pages, and gives the pages
// after them keys turned by -drop_pages * T, in NEW pages when a page is
// shared (a fork, a restored checkpoint's pages in RAM), so no other
// sequence sees a change; otherwise in place, after taking it out of the
// prefix cache (PagePool::TakeSole), so no one can pick it up meanwhile.
// The kept pages are untouched and keep their ids. Afterwards kv->length()
// is the old length minus drop_pages * T; pages reserved past the length
// are released. Allocations may use the pool's reserve (`from_reserve`,
// PagePool::SetReserved).
// Errors (nothing changes): INVALID_ARGUMENT for a plan outside the
// sequence (it must have keep_pages >= 0, drop_pages >= 1 and cover
// (keep_pages + drop_pages) * T positions); RESOURCE_EXHAUSTED when the
// pool has no page for a copy.
absl::Status SlideKv(const KeyRotation& rotation, const SlidePlan& plan, bool from_reserve,
                     KvSequence* kv);

// A slide by any number of tokens (a chat session's turn-aligned slide,
// model/turn_slide_plan.h): positions [keep_tokens, keep_tokens +
// drop_tokens) go, and every later position p moves to p - drop_tokens.
struct TokenSlide {
  int keep_tokens = 0;
  int drop_tokens = 0;
};

// Applies `slide` to `kv`. When both counts are multiples of T this is
// SlideKv of the same whole pages (the fast path, pages turned in place
// when unshared). Otherwise the kept full pages (the first keep_tokens / T)
// stay untouched with their ids, and every page from the one holding
// position keep_tokens on is rebuilt: the kept slots of the partial kept
// page stay as they are, the moved tokens' K/V rows are copied to their new
// slots and their keys turned by -drop_tokens. A page this sequence holds
// alone is rebuilt in place (after taking it out of the prefix cache,
// PagePool::TakeSole); a shared one (a fork, a restored checkpoint) in a
// NEW page, so no other sequence sees a change. Pages no longer needed
// lose this sequence's reference. Afterwards
// kv->length() is the old length minus drop_tokens; pages reserved past
// the length are released. `from_reserve` as for SlideKv.
// Errors (nothing changes): INVALID_ARGUMENT unless 0 <= keep_tokens,
// 1 <= drop_tokens and keep_tokens + drop_tokens <= length;
// RESOURCE_EXHAUSTED when the pool has no page for the rebuilt pages.
absl::Status SlideKvTokens(const KeyRotation& rotation, const TokenSlide& slide,
                           bool from_reserve, KvSequence* kv);

}  // namespace kvs

#endif  // KVSESSION_MODEL_KV_SLIDE_H_
