#include "service/session_kv.h"

#include <algorithm>

#include "model/kv_slide.h"
#include "model/turn_slide_plan.h"
#include "service/session_io_metrics.h"

namespace kvs {

SessionKv::SessionKv(Session* session, PagePool* pool, KvRoomMaker* room)
    : session_(session), pool_(pool), room_(room) {}

int SessionKv::lag() const {
  const int target = std::max(0, static_cast<int>(session_->tokens.size()) - 1);
  return target - kv_length();
}

void SessionKv::ReserveCapacity(size_t more) {
  session_->ReserveTokens(more);
  session_->kv->ReserveTable(static_cast<int>(session_->tokens.size() + more));
}

int SessionKv::AttachCachedPrefix(int max_tokens) {
  Session& s = *session_;
  const int t = pool_->geometry().page_tokens;
  int attached = 0;
  while (s.kv->length() % t == 0 && max_tokens - attached >= t) {
    const int i = s.kv->length() / t;
    if (s.page_hashes->size() != i) break;
    const PageHash hash =
        s.page_hashes->NextPageHash(std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(i) * t, t));
    // An admitted job's (from the reserve), a reference of the session's owner.
    std::optional<PageId> page = pool_->LookupKey(hash.bytes, /*from_reserve=*/true, s.kv->owner());
    if (const SessionIoMetrics* m = GetSessionIoMetrics()) {
      m->prefix_lookups->Add();
      if (page) m->prefix_hits->Add();
    }
    if (!page) break;
    s.kv->AppendPage(*page);
    s.page_hashes->Adopt({&hash, 1});
    attached += t;
  }
  return attached;
}

absl::Status SessionKv::Reserve(int n) {
  // An admitted job's pages are set aside for it (Engine admission).
  absl::Status st = session_->kv->PrepareAppend(n, /*from_reserve=*/true);
  if (absl::IsResourceExhausted(st)) {
    const int t = pool_->geometry().page_tokens;
    if (room_->MakeRoom(n / t + 2)) st = session_->kv->PrepareAppend(n, /*from_reserve=*/true);
  }
  return st;
}

ForwardItem SessionKv::Item(int n, Logits logits) const {
  return {&*session_->kv, std::span<const int32_t>(session_->tokens).subspan(kv_length(), n), logits};
}

int SessionKv::Commit() {
  Session& s = *session_;
  const int before = s.page_hashes->size();
  s.page_hashes->Extend(s.tokens, s.kv->length() / pool_->geometry().page_tokens);
  for (int i = before; i < s.page_hashes->size(); ++i) {
    pool_->SetKey(s.kv->page_table()[i], s.page_hashes->hashes()[i].bytes);
  }
  return before;
}

absl::StatusOr<int> SessionKv::Slide(const KeyRotation& rotation, int max_context,
                                     const ChatJob* chat) {
  Session& s = *session_;
  const int t = pool_->geometry().page_tokens;
  // A chat keeps its conversation start whichever way it slides.
  const bool chat_started = chat != nullptr && s.chat.started;
  const int keep_tokens = chat_started ? std::max(s.keep_tokens, chat->conversation_start_tokens) : s.keep_tokens;
  if (chat_started) {
    const std::optional<TokenSlide> turns =
        PlanTurnSlide(s.tokens, s.kv->length(), max_context, keep_tokens, chat->turn_start_ids);
    if (turns) {
      if (absl::Status st = SlideTokens(rotation, *turns); !st.ok()) return st;
      return turns->drop_tokens;
    }
  }
  absl::StatusOr<SlidePlan> plan = PlanSlide(s.kv->length(), max_context, keep_tokens, t);
  // A conversation start too long to leave a page to drop (not a real
  // template's): the session's own keep_tokens, as for any session.
  if (!plan.ok() && keep_tokens != s.keep_tokens) plan = PlanSlide(s.kv->length(), max_context, s.keep_tokens, t);
  if (!plan.ok()) return plan.status();
  const int keep = plan->keep_pages, drop = plan->drop_pages;
  // The salt names everything up to the last dropped page.
  s.page_hashes->Extend(s.tokens, s.kv->length() / t);
  const PageHash salt = SlideSalt(s.page_hashes->hashes()[keep + drop - 1], keep, drop);
  const int salt_page = SaltPage(keep);
  absl::Status st = SlideKv(rotation, *plan, /*from_reserve=*/true, &*s.kv);
  if (absl::IsResourceExhausted(st)) {
    const int moved = s.kv->num_pages() - keep - drop;
    if (room_->MakeRoom(moved + 1)) st = SlideKv(rotation, *plan, /*from_reserve=*/true, &*s.kv);
  }
  if (!st.ok()) return st;
  const int dropped = drop * t;
  {
    absl::MutexLock lock(&s.tokens_mu);
    s.tokens.erase(s.tokens.begin() + static_cast<ptrdiff_t>(keep) * t,
                   s.tokens.begin() + static_cast<ptrdiff_t>(keep + drop) * t);
  }
  s.slide_salt = ChainSalt{salt_page, salt};
  s.tokens_dropped += dropped;
  s.page_hashes->Truncate(salt_page);
  s.page_hashes->SetSalt(*s.slide_salt);
  Commit();  // hashes and keys the moved full pages
  return dropped;
}

int SessionKv::SaltPage(int first_changed) const {
  const std::optional<ChainSalt>& current = session_->page_hashes->salt();
  return current && current->page < first_changed ? current->page : first_changed;
}

absl::Status SessionKv::SlideTokens(const KeyRotation& rotation, const TokenSlide& slide) {
  Session& s = *session_;
  const int t = pool_->geometry().page_tokens;
  const int keep = slide.keep_tokens, end = slide.keep_tokens + slide.drop_tokens;
  // The salt names every token up to the last dropped one (the hash of the
  // page holding it, up to it; earlier slides included) and the shift.
  s.page_hashes->Extend(s.tokens, s.kv->length() / t);
  PageHashChain upto = *s.page_hashes;
  upto.Truncate((end - 1) / t);
  const PageHash last = upto.NextPageHash(
      std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>((end - 1) / t) * t,
                                                 static_cast<size_t>(end - (end - 1) / t * t)));
  const PageHash salt = SlideSalt(last, keep, slide.drop_tokens);
  const int salt_page = SaltPage(keep / t);
  absl::Status st = SlideKvTokens(rotation, slide, /*from_reserve=*/true, &*s.kv);
  if (absl::IsResourceExhausted(st)) {
    const int rebuilt = s.kv->num_pages() - keep / t;
    if (room_->MakeRoom(rebuilt + 1)) st = SlideKvTokens(rotation, slide, /*from_reserve=*/true, &*s.kv);
  }
  if (!st.ok()) return st;
  {
    absl::MutexLock lock(&s.tokens_mu);
    s.tokens.erase(s.tokens.begin() + keep, s.tokens.begin() + end);
  }
  // Pages before the one holding the first dropped token are unchanged and
  // keep their hashes; that page (rewritten) and every later one are salted.
  s.slide_salt = ChainSalt{salt_page, salt};
  s.tokens_dropped += slide.drop_tokens;
  s.page_hashes->Truncate(salt_page);
  s.page_hashes->SetSalt(*s.slide_salt);
  Commit();
  return absl::OkStatus();
}

}  // namespace kvs
