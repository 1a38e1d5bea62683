#include "service/transport_options.h"

#include <grpc/grpc.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace kvs {
namespace {

absl::Status AtLeast(const char* flag, int value, int least) {
  if (value >= least) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be >= ", least));
}

}  // namespace

absl::Status TransportOptions::Validate() const {
  for (absl::Status s : {AtLeast("max-concurrent-streams", max_concurrent_streams, 0),
                         AtLeast("keepalive-time-ms", keepalive_time_ms, 1),
                         AtLeast("keepalive-timeout-ms", keepalive_timeout_ms, 1),
                         AtLeast("min-client-ping-interval-ms", min_client_ping_interval_ms, 0),
                         AtLeast("max-connection-idle-ms", max_connection_idle_ms, 0),
                         AtLeast("max-connection-age-ms", max_connection_age_ms, 0),
                         AtLeast("max-connection-age-grace-ms", max_connection_age_grace_ms, 0)}) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string TransportOptions::Warning() const {
  if (keepalive_timeout_ms > 5000) return "";
  return absl::StrCat("--keepalive-timeout-ms ", keepalive_timeout_ms,
                      " is at most gRPC's 5 s backup poll: idle clients on a synchronous gRPC API "
                      "may be cut off while alive");
}

void TransportOptions::Apply(grpc::ServerBuilder& builder) const {
  if (max_concurrent_streams > 0) builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, max_concurrent_streams);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, keepalive_time_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, keepalive_timeout_ms);
  // The server pings idle connections too, and clients may ping on them.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, min_client_ping_interval_ms);
  if (max_connection_idle_ms > 0) builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, max_connection_idle_ms);
  if (max_connection_age_ms > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, max_connection_age_ms);
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, max_connection_age_grace_ms);
  }
}

}  // namespace kvs
