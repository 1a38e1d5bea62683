// The server's side of fleet routing (docs/fleet.md, proto/route_key.h).
//
// A proxy in front of N replicas hashes each call on its
// `x-kvsession-route` header. The replica reads that header only on
// CreateSession, to put the key in the new session's id (so the id routes
// back to it); forks, checkpoints and restores inherit the key from the id
// they come from. Every response carries `x-kvsession-replica: NAME` so a
// client or operator can see which replica answered.
//
// Thread-safe: the functions are pure; the interceptor factory is
// immutable after construction.
#ifndef KVSESSION_SERVICE_FLEET_ROUTING_H_
#define KVSESSION_SERVICE_FLEET_ROUTING_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include "absl/status/statusor.h"

namespace kvs {

// The route key the call carries in `x-kvsession-route`: "" when it has
// none; INVALID_ARGUMENT when it is not 1 to 64 of [A-Za-z0-9_-] or comes
// more than once (the message gives its size, never its bytes).
absl::StatusOr<std::string> RouteKeyOfCall(const grpc::ServerContextBase& ctx);

// A gRPC server interceptor factory that adds `x-kvsession-replica:
// replica` to every response's initial and trailing metadata.
// `replica` must be a valid header value (ValidReplicaName).
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> ReplicaHeaderInterceptors(
    std::string replica);

// True for a usable --replica-name: 1 to 253 printable ASCII characters,
// no spaces (a hostname, a pod name).
bool ValidReplicaName(const std::string& name);

}  // namespace kvs

#endif  // KVSESSION_SERVICE_FLEET_ROUTING_H_
