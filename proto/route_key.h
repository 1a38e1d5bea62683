// Fleet routing (docs/fleet.md): the route key an id carries and the
// metadata headers a proxy and the replicas exchange. One definition for
// the server and the clients.
//
// An id is PREFIX [KEY "."] HEX: "ses_" or "ckpt_", then optionally a route
// key and a dot, then 32 lowercase hex digits (128 random bits). A key is
// 1 to 64 of [A-Za-z0-9_-] (no dot, so the first dot ends it). A session,
// its forks, its checkpoints and the sessions restored from them share one
// key, so a proxy that hashes on the key sends a whole family to one
// replica. Ids without a key ("ses_HEX") are what a server makes when a
// CreateSession carries no key (no proxy in front): they route nowhere in
// particular.
//
// Pure functions; thread-safe.
#ifndef KVSESSION_PROTO_ROUTE_KEY_H_
#define KVSESSION_PROTO_ROUTE_KEY_H_

#include <cstddef>
#include <string_view>

namespace kvs {

// The request header a proxy hashes on (set by the clients from the id
// they name; by the proxy for a CreateSession that has none).
inline constexpr char kRouteHeader[] = "x-kvsession-route";
// The response header naming the replica that answered (--replica-name).
inline constexpr char kReplicaHeader[] = "x-kvsession-replica";
inline constexpr size_t kMaxRouteKeyBytes = 64;

// True for 1 to 64 characters of [A-Za-z0-9_-].
bool IsRouteKey(std::string_view key);

// The route key of "ses_KEY.HEX" or "ckpt_KEY.HEX": KEY. Empty for an id
// without a key ("ses_HEX") and for anything that has no valid key before
// its first dot. Does not check the HEX part (request_checks.h does).
std::string_view RouteKeyOf(std::string_view id);

}  // namespace kvs

#endif  // KVSESSION_PROTO_ROUTE_KEY_H_
