#include "service/request_checks.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proto/route_key.h"

namespace kvs {
namespace {

constexpr size_t kIdHexDigits = 32;

// PREFIX [KEY "."] HEX (proto/route_key.h).
bool HasIdForm(absl::string_view id, absl::string_view prefix) {
  if (!absl::StartsWith(id, prefix)) return false;
  const std::string_view key = RouteKeyOf(std::string_view(id.data(), id.size()));
  const size_t hex_start = prefix.size() + (key.empty() ? 0 : key.size() + 1);
  if (id.size() != hex_start + kIdHexDigits) return false;
  for (char c : id.substr(hex_start)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

absl::Status BadId(absl::string_view field, absl::string_view id, absl::string_view prefix) {
  return absl::InvalidArgumentError(absl::StrCat(field, " must be ", prefix, "[KEY.]HEX (HEX: ",
                                                 kIdHexDigits, " lowercase hex digits; KEY: a route key); got ",
                                                 Quote(id)));
}

}  // namespace

bool IsSessionId(absl::string_view id) { return HasIdForm(id, kSessionIdPrefix); }
bool IsCheckpointId(absl::string_view id) { return HasIdForm(id, kCheckpointIdPrefix); }

absl::Status CheckSessionId(absl::string_view field, absl::string_view id) {
  return IsSessionId(id) ? absl::OkStatus() : BadId(field, id, kSessionIdPrefix);
}

absl::Status CheckCheckpointId(absl::string_view field, absl::string_view id) {
  return IsCheckpointId(id) ? absl::OkStatus() : BadId(field, id, kCheckpointIdPrefix);
}

absl::Status CheckSessionPageToken(absl::string_view token) {
  if (token.empty() || IsSessionId(token)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "page_token must be empty or the next_page_token of a previous ListSessions; got ", Quote(token)));
}

absl::Status CheckCheckpointPageToken(absl::string_view token) {
  if (token.empty() || IsCheckpointId(token)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "page_token must be empty or the next_page_token of a previous ListCheckpoints; got ",
      Quote(token)));
}

absl::Status CheckExpectedLength(bool has_expected, int64_t expected, int64_t length) {
  if (!has_expected || expected == length) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("the session holds ", length, " tokens, not the expected_length ", expected, "; nothing changed"));
}

}  // namespace kvs
