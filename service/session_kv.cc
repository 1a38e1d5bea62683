#include "service/session_kv.h"

#include <algorithm>

namespace kvs {

PageHash PageKeys::FullPage(std::span<const PageHash> full_hashes, std::span<const int32_t> tokens,
                            int i) const {
  const int t = geometry_.page_tokens;
  const PageHash prev = i > 0 ? full_hashes[i - 1] : PageHash{};
  return ChainPageHash(prev, fingerprint_, geometry_, tokens.subspan(static_cast<size_t>(i) * t, t));
}

PageHash PageKeys::TailPageHash(std::span<const PageHash> full_hashes,
                                std::span<const int32_t> tokens, int kv_length) const {
  const int t = geometry_.page_tokens;
  const int full = kv_length / t;
  const PageHash prev = full > 0 ? full_hashes[full - 1] : PageHash{};
  return ChainPageHash(prev, fingerprint_, geometry_,
                       tokens.subspan(static_cast<size_t>(full) * t, kv_length - full * t));
}

SessionKv::SessionKv(Session* session, PagePool* pool, const RecordContext& context,
                     KvRoomMaker* room)
    : session_(session), pool_(pool), keys_(context), room_(room) {}

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
    if (static_cast<int>(s.full_page_hashes.size()) != i) break;
    const PageHash hash = keys_.FullPage(s.full_page_hashes, s.tokens, i);
    std::optional<PageId> page = pool_->LookupKey(hash.bytes);
    if (!page) break;
    s.kv->AppendPage(*page);
    s.full_page_hashes.push_back(hash);
    attached += t;
  }
  return attached;
}

absl::Status SessionKv::Reserve(int n) {
  absl::Status st = session_->kv->PrepareAppend(n);
  if (absl::IsResourceExhausted(st)) {
    const int t = pool_->geometry().page_tokens;
    if (room_->MakeRoom(n / t + 2)) st = session_->kv->PrepareAppend(n);
  }
  return st;
}

ForwardItem SessionKv::Item(int n, Logits logits) const {
  return {&*session_->kv, std::span<const int32_t>(session_->tokens).subspan(kv_length(), n), logits};
}

void SessionKv::Commit() {
  Session& s = *session_;
  const int full = s.kv->length() / pool_->geometry().page_tokens;
  while (static_cast<int>(s.full_page_hashes.size()) < full) {
    const int i = static_cast<int>(s.full_page_hashes.size());
    s.full_page_hashes.push_back(keys_.FullPage(s.full_page_hashes, s.tokens, i));
    pool_->SetKey(s.kv->page_table()[i], s.full_page_hashes.back().bytes);
  }
}

}  // namespace kvs
