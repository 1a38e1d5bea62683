#include "service/session_rewind.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kvs {

int MinSessionLength(const Tokenizer& tokenizer) {
  return tokenizer.add_bos() && tokenizer.bos_id() >= 0 ? 1 : 0;
}

absl::Status CheckCutLength(const char* field, int length, int current, int min_length) {
  if (length < min_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " must be at least ", min_length,
        min_length > 0 ? " (the BOS every session starts with stays)" : "", ", got ", length));
  }
  if (length > current) {
    return absl::OutOfRangeError(absl::StrCat(field, " ", length, " is past the end of the session (",
                                              current, " tokens)"));
  }
  return absl::OkStatus();
}

void CopyPrefix(const Session& src, int length, Session* dst) {
  dst->tokens.assign(src.tokens.begin(), src.tokens.begin() + length);
  const int kv_length = std::min(src.kv->length(), KvLengthFor(length));
  dst->kv.emplace(src.kv->Fork());
  dst->kv->Truncate(kv_length);
  dst->page_hashes = src.page_hashes;
  dst->shared_prefix_chain = src.shared_prefix_chain;
  const int t = src.kv->geometry().page_tokens;
  dst->page_hashes->Truncate(kv_length / t);
  // A prefix that reaches into the first slid page keeps the slide's salt;
  // one within the kept pages never saw a slide (the chain drops its salt
  // the same way). A cut there (shorter than the source) takes a salt that
  // names the cut too (CutSalt, at the same page): what it appends is
  // computed after the slide, where the source's rows were computed before
  // it, so the two must not share page hashes from the salted page on.
  dst->slide_salt.reset();
  if (src.slide_salt && length > src.slide_salt->page * t) {
    dst->slide_salt = src.slide_salt;
    if (length < static_cast<int>(src.tokens.size())) {
      dst->slide_salt->hash = CutSalt(src.slide_salt->hash, length);
      dst->page_hashes->Truncate(dst->slide_salt->page);
      dst->page_hashes->SetSalt(*dst->slide_salt);
    }
  }
  // Length 1 is the BOS alone when the vocabulary adds one; without BOS a
  // one-token prefix is a single token of content, which (rendered or not)
  // starts nothing: treat both as no conversation start.
  dst->chat = ChatStateForPrefix(src.chat, static_cast<int>(src.tokens.size()), length,
                                 /*min_length=*/1);
}

ChatState ChatStateForPrefix(const ChatState& src, int src_length, int length, int min_length) {
  if (length >= src_length) return src;
  ChatState out;
  out.started = src.started && length > min_length;
  out.turn_open = false;
  return out;
}

}  // namespace kvs
