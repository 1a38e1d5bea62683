// SessionManager::Truncate (session_manager.h): the cut state is built
// beside the session and written first, so a failed write leaves the
// session exactly as it was; only then does the session take it.
#include "absl/time/clock.h"
#include "service/session_manager.h"
#include "service/session_rewind.h"

namespace kvs {

absl::StatusOr<SessionInfo> SessionManager::Truncate(const std::string& id, int length, int* removed,
                                                     absl::Time deadline) {
  absl::StatusOr<std::shared_ptr<Session>> acquired = Acquire(id, "Truncate", deadline);
  if (!acquired.ok()) return acquired.status();
  const std::shared_ptr<Session> s = *std::move(acquired);
  const int current = static_cast<int>(s->tokens.size());  // the holder reads without the lock
  absl::Status st = CheckCutLength("length", length, current, MinSessionLength(model_.tokenizer()));
  if (!st.ok() || length == current) {
    SessionInfo info;
    registry_.Release(*s, &info);
    if (!st.ok()) return st;
    if (removed != nullptr) *removed = 0;
    return info;
  }

  Session cut;
  cut.id = s->id;  // for the store's messages
  CopyPrefix(*s, length, &cut);
  // The session's record (id, sampling, generator, labels, times, parent,
  // next version) with the cut's tokens, KV length and page hashes.
  const SessionRecord content = BuildSessionRecord(cut, context_);
  SessionRecord record = registry_.UnderLock([&] {
    SessionRecord r = BuildSessionRecord(*s, context_);
    r.set_update_time_us(absl::ToUnixMicros(absl::Now()));
    return r;
  });
  *record.mutable_tokens() = content.tokens();
  record.set_kv_length(content.kv_length());
  *record.mutable_page_hashes() = content.page_hashes();
  record.set_chat(content.chat());
  record.set_chat_turn_open(content.chat_turn_open());
  record.set_slide_salt(content.slide_salt());
  record.set_slide_salt_page(content.slide_salt_page());
  if (st = persistence_.Write(record, cut); !st.ok()) {
    registry_.Release(*s);
    return st;  // `cut` gives its page references back
  }

  // Persisted: the session takes the cut. Its old table's references to
  // pages past the cut go with it (back to the pool unless a fork holds them).
  registry_.SetKv(*s, *std::move(cut.kv));
  s->page_hashes = std::move(cut.page_hashes);
  s->slide_salt = cut.slide_salt;
  {
    absl::MutexLock lock(&s->tokens_mu);
    s->tokens.resize(length);
    s->chat = cut.chat;
  }
  registry_.UnderLock([&] { s->update_time_us = record.update_time_us(); });
  registry_.MarkPersisted(record, *s);
  SessionInfo info;
  registry_.Release(*s, &info);
  if (removed != nullptr) *removed = current - length;
  return info;
}

}  // namespace kvs
