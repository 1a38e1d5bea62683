// KvSessionService::Truncate: checks the request on gRPC's thread, cuts and
// persists the session on the request executor (SessionManager::Truncate).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "service/grpc_status.h"
#include "service/kvsession_service.h"
#include "service/proto_convert.h"
#include "service/request_checks.h"

namespace kvs {
namespace v1 = kvsession::v1;

grpc::ServerUnaryReactor* KvSessionService::Truncate(grpc::CallbackServerContext* ctx,
                                                     const v1::TruncateRequest* request,
                                                     v1::TruncateResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::Status st = CheckSessionId("session_id", request->session_id());
  if (st.ok() && request->length() < 0) {
    st = absl::InvalidArgumentError(absl::StrCat("length must be at least 0, got ", request->length()));
  }
  if (!st.ok()) {
    reactor->Finish(ToGrpc(st));
    return reactor;
  }
  // Waits for a session another call is letting go of as the other calls do:
  // within the call's deadline, at most 30 s (kvsession_service.cc).
  const absl::Time deadline =
      std::min(absl::FromChrono(ctx->deadline()), absl::Now() + absl::Seconds(30));
  io_->Submit([this, reactor, request, response, deadline] {
    int removed = 0;
    absl::StatusOr<SessionInfo> info =
        sessions_->Truncate(request->session_id(), request->length(), &removed, deadline);
    if (info.ok()) {
      ToProto(*info, response->mutable_session());
      response->set_removed_tokens(removed);
    }
    reactor->Finish(ToGrpc(info.status()));
  });
  return reactor;
}

}  // namespace kvs
