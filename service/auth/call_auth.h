// Call authentication: the Principal of one gRPC call, from its
// `authorization` metadata (Authenticator::Authenticate).
//
// With no Authenticator (kvsessiond without --auth-keys) every call is the
// default tenant, a user, and the header is ignored.
//
// Statuses: Authenticator::Authenticate's (UNAUTHENTICATED). Stateless and
// thread-safe: a handler may call it again on any thread while the call is
// alive and gets the same principal (unless the keys were reloaded and its
// key removed meanwhile: UNAUTHENTICATED then).
#ifndef KVSESSION_SERVICE_AUTH_CALL_AUTH_H_
#define KVSESSION_SERVICE_AUTH_CALL_AUTH_H_

#include <grpcpp/server_context.h>

#include "absl/status/statusor.h"
#include "service/auth/authenticator.h"
#include "service/auth/principal.h"

namespace kvs {

absl::StatusOr<Principal> AuthenticateCall(const Authenticator* authenticator,
                                           const grpc::ServerContextBase& ctx);

}  // namespace kvs

#endif  // KVSESSION_SERVICE_AUTH_CALL_AUTH_H_
