// Call authentication: the Principal of one gRPC call, from its
// `authorization` metadata (Authenticator::Authenticate), and an admin
// acting for a tenant.
//
// With no Authenticator (kvsessiond without --auth-keys) every call is the
// default tenant, a user, and the authorization header is ignored.
//
// Acting for a tenant: a call with metadata `x-kvsession-tenant: T` made
// with an admin key is tenant T's call, as a user of T (Principal{T, user,
// acting_admin = the admin's tenant}): it creates sessions owned by T,
// lists only T's, sees only T's ids, and its prefix-cache chains are T's.
// T need not appear in the keys file.
//
// Statuses: Authenticator::Authenticate's (UNAUTHENTICATED, checked
// first); PERMISSION_DENIED "only an admin key may act for a tenant
// (x-kvsession-tenant)" when a non-admin (or anyone without --auth-keys)
// sends the header; INVALID_ARGUMENT "x-kvsession-tenant must be one tenant
// name of 1-64 [A-Za-z0-9_.-]" when it is malformed or repeated (the value
// is never echoed). Stateless and thread-safe: a handler may call it again
// on any thread while the call is alive and gets the same principal
// (unless the keys were reloaded and its key removed meanwhile:
// UNAUTHENTICATED then).
#ifndef KVSESSION_SERVICE_AUTH_CALL_AUTH_H_
#define KVSESSION_SERVICE_AUTH_CALL_AUTH_H_

#include <grpcpp/server_context.h>

#include "absl/status/statusor.h"
#include "service/auth/authenticator.h"
#include "service/auth/principal.h"

namespace kvs {

// The metadata key an admin acts for a tenant with.
inline constexpr char kActAsTenantHeader[] = "x-kvsession-tenant";

absl::StatusOr<Principal> AuthenticateCall(const Authenticator* authenticator,
                                           const grpc::ServerContextBase& ctx);

// The principal of the call's key alone, ignoring x-kvsession-tenant (the
// audit log names who sent a refused header). UNAUTHENTICATED as above.
absl::StatusOr<Principal> AuthenticateKey(const Authenticator* authenticator,
                                          const grpc::ServerContextBase& ctx);

}  // namespace kvs

#endif  // KVSESSION_SERVICE_AUTH_CALL_AUTH_H_
