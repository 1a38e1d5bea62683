// Checks on client-supplied identifiers, and quoting of client input in
// error messages.
//
// Ids are what the server hands out: "ses_" or "ckpt_", optionally a route
// key and a dot (proto/route_key.h: 1 to 64 of [A-Za-z0-9_-]), then 32
// lowercase hex digits (128 random bits). Anything else is
// INVALID_ARGUMENT, checked before any lookup, so a malformed or huge id
// never reaches a registry, a log line or a status message. Every message
// that echoes client input goes through Quote() (proto/bounded_quote.h),
// which bounds it.
//
// Pure functions; thread-safe.
#ifndef KVSESSION_SERVICE_REQUEST_CHECKS_H_
#define KVSESSION_SERVICE_REQUEST_CHECKS_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "proto/bounded_quote.h"

namespace kvs {

inline constexpr char kSessionIdPrefix[] = "ses_";
inline constexpr char kCheckpointIdPrefix[] = "ckpt_";

bool IsSessionId(absl::string_view id);
bool IsCheckpointId(absl::string_view id);

// OK, or INVALID_ARGUMENT naming `field` and quoting a prefix of `id`.
absl::Status CheckSessionId(absl::string_view field, absl::string_view id);
absl::Status CheckCheckpointId(absl::string_view field, absl::string_view id);
// A list's page_token: empty (the first page) or the id the previous page
// ended with. INVALID_ARGUMENT otherwise.
absl::Status CheckSessionPageToken(absl::string_view token);
absl::Status CheckCheckpointPageToken(absl::string_view token);
// A call's expected_length against the session's `length`: OK when it is
// unset or equal, FAILED_PRECONDITION giving both otherwise.
absl::Status CheckExpectedLength(bool has_expected, int64_t expected, int64_t length);

}  // namespace kvs

#endif  // KVSESSION_SERVICE_REQUEST_CHECKS_H_
