// How a message quotes bytes that came from outside the process: a
// request's field, a record read from the store or a migration stream, a
// string in a model file. Such bytes can be of any size and any content,
// so a message never carries them whole: Quote() keeps a prefix, escapes
// what is not printable, and says how long the whole was.
//
// Used by the service's request checks (service/request_checks.h), the
// session store's record checks (cache/session_store_internal.h) and the
// GGUF reader (model/gguf_file.h). Pure function; thread-safe.
#ifndef KVSESSION_PROTO_BOUNDED_QUOTE_H_
#define KVSESSION_PROTO_BOUNDED_QUOTE_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace kvs {

// The quote of a short input is never longer than this many bytes of it.
inline constexpr size_t kDefaultQuoteBytes = 48;

// At most `max_bytes` of `input`, C-escaped, in single quotes, with its
// total size when it was cut: 'ses_zz\xff...' (4000 bytes). The result is
// at most 4 * max_bytes + 32 bytes long, whatever `input` holds.
std::string Quote(absl::string_view input, size_t max_bytes = kDefaultQuoteBytes);

}  // namespace kvs

#endif  // KVSESSION_PROTO_BOUNDED_QUOTE_H_
