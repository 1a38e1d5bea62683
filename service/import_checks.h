// The checks an imported session record (ImportSession, cache/
// migration_stream.h) passes on top of the store's own invariants
// (cache/record_validation.h), before anything is written: the fields a
// session of this server could never hold, whatever server wrote the
// stream. A stream is client bytes; what it says is taken as a request
// would be, so a session it makes can be used as it is.
//
//   every token id is in [0, vocab_size) (each is fed to the model; the
//     last one is in no page, so no page hash vouches for it);
//   kv_length leaves the last token out (at most tokens - 1, or 0): the
//     next Generate feeds that token for its logits (service/session.h);
//     a KV over it left the Generate nothing to feed, and it ran until its
//     deadline;
//   the sampling defaults pass SamplingParams::ValidateFor(vocab_size), as
//     a CreateSession's would (a record without them, proto3's zeros, has
//     top_p 0: refused, not stored to fail every later Generate);
//   context_policy is ERROR (0) or SLIDE (1); keep_tokens is in
//     [0, context_length] (a server clamps it to its max_context);
//     tokens_dropped in [0, 2^62) (a slide adds to it);
//   a slid session's salt page starts within its tokens (slide_salt_page *
//     page_tokens < tokens: a slide puts the salt at or before the kept
//     pages, and a cut or fork below it drops it).
// The caller has checked the record is of this server's model and KV
// geometry (SessionManager::Import: FAILED_PRECONDITION first).
//
// Pure function, thread-safe. INVALID_ARGUMENT naming the first field
// that fails; messages quote numbers, never the record's strings.
#ifndef KVSESSION_SERVICE_IMPORT_CHECKS_H_
#define KVSESSION_SERVICE_IMPORT_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "cache/session_record.pb.h"

namespace kvs {

// `vocab_size` and `context_length` are the model's, `page_tokens` the KV
// geometry's.
absl::Status CheckImportedSession(const SessionRecord& record, int32_t vocab_size, int32_t context_length,
                                  int32_t page_tokens);

}  // namespace kvs

#endif  // KVSESSION_SERVICE_IMPORT_CHECKS_H_
