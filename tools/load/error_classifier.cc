#include "tools/load/error_classifier.h"

#include <string>

#include "absl/strings/match.h"
#include "service/auth/api_key_file.h"

namespace kvs::load {

const char kClassificationRules[] =
    "Errors are classified as expected or unexpected (in this order):\n"
    "  1. UNAVAILABLE while the tool has killed the server (kill window): expected.\n"
    "  2. FAILED_PRECONDITION / ABORTED \"busy\": expected when another call of the tool\n"
    "     ran on the same session (a real conflict). Without one it is reported as\n"
    "     \"busy: idle session\" (issue 8 item 2) or \"busy: after cancel\" (issue 8\n"
    "     item 3); both count as expected unless --strict-busy is given.\n"
    "  3. NOT_FOUND for a session or checkpoint the tool deleted from another client:\n"
    "     expected.\n"
    "  4. RESOURCE_EXHAUSTED \"tenant quota ... reached\" for the tenant given a quota by\n"
    "     --tenant-quota: expected; for any other tenant it is unexpected.\n"
    "  5. Anything else is unexpected: INTERNAL, UNKNOWN, DATA_LOSS, OUT_OF_RANGE,\n"
    "     other RESOURCE_EXHAUSTED, UNAVAILABLE outside a kill window, a Generate stream that\n"
    "     breaks after its first token outside a kill window, a result contradicting\n"
    "     an acknowledged call (WRONG_RESULT), and any exit of the server the tool did\n"
    "     not cause.\n";

bool IsBusy(const absl::Status& status) {
  return (absl::IsFailedPrecondition(status) || absl::IsAborted(status)) &&
         absl::StrContains(status.message(), "busy");
}

bool IsTenantQuotaRefusal(const absl::Status& status) {
  return absl::IsResourceExhausted(status) && absl::StartsWith(status.message(), "tenant quota ");
}

std::string_view RefusedQuota(const absl::Status& status) {
  if (!IsTenantQuotaRefusal(status)) return "";
  const std::string rest(status.message().substr(std::string_view("tenant quota ").size()));
  for (std::string_view name : kKeysFileQuotaNames) {
    if (rest.size() > name.size() && rest.compare(0, name.size(), name) == 0 && rest[name.size()] == '=') {
      return name;
    }
  }
  return "";
}

Classification ClassifyError(const absl::Status& status, const CallContext& context,
                             bool strict_busy) {
  if (absl::IsUnavailable(status) && context.kill_window) return {ErrorKind::kKillWindow, true};
  if (IsBusy(status)) {
    if (context.overlapped_on_session) return {ErrorKind::kBusyConflict, true};
    // The server reports busy for neither since issue 8 items 2-3; the CI
    // test runs with --strict-busy so a regression fails it.
    if (context.recent_cancel_on_session) return {ErrorKind::kBusyAfterCancel, !strict_busy};
    return {ErrorKind::kBusyIdle, !strict_busy};
  }
  if (absl::IsNotFound(status) && context.target_deleted) return {ErrorKind::kDeletedTarget, true};
  if (IsTenantQuotaRefusal(status) && context.caller_has_quota) return {ErrorKind::kTenantQuota, true};
  if (context.mid_stream) return {ErrorKind::kMidStream, false};
  return {ErrorKind::kOther, false};
}

std::string_view ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kKillWindow: return "kill window";
    case ErrorKind::kBusyConflict: return "busy: conflict";
    case ErrorKind::kBusyIdle: return "busy: idle session (issue 8.2)";
    case ErrorKind::kBusyAfterCancel: return "busy: after cancel (issue 8.3)";
    case ErrorKind::kDeletedTarget: return "deleted by another client";
    case ErrorKind::kTenantQuota: return "tenant quota";
    case ErrorKind::kMidStream: return "stream broke mid-way";
    case ErrorKind::kOther: return "unexpected";
  }
  return "?";
}

}  // namespace kvs::load
