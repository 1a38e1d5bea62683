// TransportOptions: how kvsessiond's HTTP/2 connections are bounded and
// kept honest (kvsessiond's --max-concurrent-streams, --keepalive-*,
// --max-connection-*; docs/operations.md, "Connections").
//
//  - max_concurrent_streams: calls one connection may have open at once
//    (SETTINGS_MAX_CONCURRENT_STREAMS). A client's further calls on that
//    connection wait in the client until one ends; other connections are
//    not affected. 0 leaves gRPC's own (no limit).
//  - keepalive_time_ms / keepalive_timeout_ms: the server pings a
//    connection (with or without calls open) after this long without
//    reading from it, and closes it (cancelling its calls) when the ping
//    is not answered in the timeout. A client connected directly that
//    vanished (powered off, cut off, frozen) stops holding its streams'
//    unsent messages, its tenant's max_generates slots and its sessions
//    within about their sum; behind a proxy, the proxy's own timeouts
//    decide. Keep the timeout above 5 s (Warning() says so): a client on
//    gRPC's synchronous API that is making no call answers pings only
//    from gRPC's backup poller, every 5 s, and would be cut off while
//    alive.
//  - min_client_ping_interval_ms: clients may send keepalive pings this
//    often, with or without calls; a client that pings more often gets
//    GOAWAY ("too_many_pings") at its third early ping (the count resets
//    whenever the server sends data), as gRPC does by default below one
//    every 5 minutes.
//  - max_connection_idle_ms: a connection with no call for this long is
//    closed (GOAWAY; the client reconnects when it next calls). 0: never.
//  - max_connection_age_ms / max_connection_age_grace_ms: a connection
//    older than this gets GOAWAY, so clients behind an L4 load balancer
//    spread again over a fleet that grew; its running calls get the grace
//    to end, then are cancelled. 0: no age limit.
//
// A value object; Apply does not keep it.
#ifndef KVSESSION_SERVICE_TRANSPORT_OPTIONS_H_
#define KVSESSION_SERVICE_TRANSPORT_OPTIONS_H_

#include <grpcpp/server_builder.h>

#include <string>

#include "absl/status/status.h"

namespace kvs {

struct TransportOptions {
  int max_concurrent_streams = 256;
  int keepalive_time_ms = 60'000;
  int keepalive_timeout_ms = 20'000;
  int min_client_ping_interval_ms = 10'000;
  int max_connection_idle_ms = 0;
  int max_connection_age_ms = 0;
  int max_connection_age_grace_ms = 60'000;

  // INVALID_ARGUMENT naming the flag when a value is out of range
  // (negative; keepalive time or timeout below 1 ms).
  absl::Status Validate() const;

  // A sentence for the log when a valid value is a risk (a keepalive
  // timeout of 5 s or less cuts off idle synchronous clients); empty
  // otherwise.
  std::string Warning() const;

  // Sets the channel arguments above on `builder`. Call after Validate.
  void Apply(grpc::ServerBuilder& builder) const;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_TRANSPORT_OPTIONS_H_
