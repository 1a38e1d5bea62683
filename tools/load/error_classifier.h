// ErrorClassifier: decides whether a failed call of the load tool is an
// error the API allows under this load (expected) or a defect (unexpected).
//
// The rules, in order (kClassificationRules below is the text --help shows):
//   1. UNAVAILABLE while the server is down because the tool killed it (the
//      call started before, or ran during, a kill window): expected.
//   2. FAILED_PRECONDITION or ABORTED that says "busy": expected when another
//      call of the tool was running on the same session (a real conflict).
//      With no such call it is the server's fault: "busy on an idle session"
//      (issue 8 item 2) or "busy after a cancel" (issue 8 item 3). Both are
//      counted apart and are expected unless `strict_busy` is set.
//   3. NOT_FOUND for a session or checkpoint the tool deleted (or was
//      deleting) from another client: expected.
//   4. RESOURCE_EXHAUSTED "tenant quota ... reached" for a caller whose
//      tenant the tool gave a quota (--tenant-quota): expected. Any other
//      tenant's quota refusal is a defect.
//   5. Everything else is unexpected: INTERNAL, UNKNOWN, DATA_LOSS,
//      OUT_OF_RANGE, other RESOURCE_EXHAUSTED, a Generate stream that fails after
//      its first token outside a kill window, and results that contradict an
//      acknowledged call ("WRONG_RESULT").
//
// Pure functions; thread-safe.
#ifndef KVSESSION_TOOLS_LOAD_ERROR_CLASSIFIER_H_
#define KVSESSION_TOOLS_LOAD_ERROR_CLASSIFIER_H_

#include <string_view>

#include "absl/status/status.h"

namespace kvs::load {

// What the tool knew about a failed call.
struct CallContext {
  // The server was killed (or was down) by the tool between the call's start
  // and its failure.
  bool kill_window = false;
  // Another call of the tool on the same session overlapped this one.
  bool overlapped_on_session = false;
  // A Generate on the session was cancelled by the tool shortly before.
  bool recent_cancel_on_session = false;
  // The session or checkpoint was deleted (or is being deleted) by the tool.
  bool target_deleted = false;
  // A Generate that had streamed at least one token.
  bool mid_stream = false;
  // The caller's tenant has a quota the tool set (--tenant-quota).
  bool caller_has_quota = false;
};

enum class ErrorKind {
  kKillWindow,     // rule 1
  kBusyConflict,   // rule 2, a real conflict
  kBusyIdle,       // rule 2, no call of ours on the session (issue 8 item 2)
  kBusyAfterCancel,// rule 2, right after our cancel (issue 8 item 3)
  kDeletedTarget,  // rule 3
  kTenantQuota,    // rule 4: refused by the caller's quota; nothing changed
  kMidStream,      // rule 5: stream broke after its first token
  kOther,          // rule 5
};

struct Classification {
  ErrorKind kind;
  bool expected;
};

// `strict_busy`: busy on an idle session / after a cancel is unexpected.
Classification ClassifyError(const absl::Status& status, const CallContext& context,
                             bool strict_busy);

// Short name of a kind for the report ("kill window", "busy: conflict", ...).
std::string_view ErrorKindName(ErrorKind kind);

// True for FAILED_PRECONDITION / ABORTED whose message says "busy".
bool IsBusy(const absl::Status& status);

// True for RESOURCE_EXHAUSTED "tenant quota NAME=LIMIT reached" (docs/api.md).
bool IsTenantQuotaRefusal(const absl::Status& status);
// NAME of such a refusal when it is one of the keys file's quotas
// (kKeysFileQuotaNames in service/auth/api_key_file.h); "" for any other
// status.
std::string_view RefusedQuota(const absl::Status& status);

// The rules as the tool's --help prints them.
extern const char kClassificationRules[];

}  // namespace kvs::load

#endif  // KVSESSION_TOOLS_LOAD_ERROR_CLASSIFIER_H_
