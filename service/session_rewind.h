// Rewinding a session: the prefix of a session, as Truncate and Fork's
// at_length keep it (proto TruncateRequest / ForkRequest.at_length).
//
// A session cut to `length` tokens is in exactly the state a new session
// created from those token ids would be in (the idle invariant of
// session.h): its KV covers every token but the last, its page-hash chain
// every full page of that KV. Nothing is recomputed and no KV byte is
// copied: the prefix shares the source's pages, and the page holding the
// cut is copied only when the prefix's owner first writes into it
// (KvSequence's copy-on-write: the page is shared, or keyed by the prefix
// cache because it was full).
//
// Pure functions; not thread-safe beyond what their arguments allow (the
// caller holds the source session as its holder or a reader).
#ifndef KVSESSION_SERVICE_SESSION_REWIND_H_
#define KVSESSION_SERVICE_SESSION_REWIND_H_

#include "absl/status/status.h"
#include "model/tokenizer.h"
#include "service/session.h"

namespace kvs {

// The shortest a session of this vocabulary can be: 1 when every session
// starts with BOS (which no cut may remove), else 0 (an empty session).
int MinSessionLength(const Tokenizer& tokenizer);

// KV positions an idle, caught-up session of `length` tokens holds:
// length - 1, or 0 for an empty session.
inline int KvLengthFor(int length) { return length > 0 ? length - 1 : 0; }

// OK when a session of `current` tokens may be cut to `length`.
// INVALID_ARGUMENT when length < min_length (no session of this server can
// be that short), OUT_OF_RANGE when length > current (past the session's
// end). `field` names the request field in the message.
absl::Status CheckCutLength(const char* field, int length, int current, int min_length);

// Sets dst's tokens, KV and page-hash chain to the first `length` tokens of
// `src` (which must be resident; requires 0 <= length <= src's tokens): a
// KV sharing src's pages up to min(src's KV length, KvLengthFor(length))
// (one new reference per page, so pages wholly past the cut stay src's
// alone), and src's chain cut to that KV's full pages, its slide salt when
// the prefix reaches a slid page, and its chat state (ChatStateForPrefix).
// Other fields of dst are left as they are; src is not changed.
void CopyPrefix(const Session& src, int length, Session* dst);

// The chat state of the first `length` of `src_length` tokens of a session
// in state `src`. The whole session keeps its state. A shorter prefix has
// no open assistant turn: the lengths a client cuts at are those a call
// returned, and a Generate's starting length is before the generation
// prompt it adds (so Generate on the prefix adds it again: "regenerate the
// last answer"). A prefix of at most `min_length` + 0 tokens (BOS alone, or
// empty) holds no conversation start.
ChatState ChatStateForPrefix(const ChatState& src, int src_length, int length, int min_length);

}  // namespace kvs

#endif  // KVSESSION_SERVICE_SESSION_REWIND_H_
