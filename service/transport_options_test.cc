#include "service/transport_options.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvs {
namespace {

using ::testing::HasSubstr;

TEST(TransportOptions, TheDefaultsAreValid) { EXPECT_TRUE(TransportOptions().Validate().ok()); }

TEST(TransportOptions, ANegativeValueIsInvalidArgumentNamingItsFlag) {
  const std::pair<int TransportOptions::*, const char*> fields[] = {
      {&TransportOptions::max_concurrent_streams, "--max-concurrent-streams"},
      {&TransportOptions::keepalive_time_ms, "--keepalive-time-ms"},
      {&TransportOptions::keepalive_timeout_ms, "--keepalive-timeout-ms"},
      {&TransportOptions::min_client_ping_interval_ms, "--min-client-ping-interval-ms"},
      {&TransportOptions::max_connection_idle_ms, "--max-connection-idle-ms"},
      {&TransportOptions::max_connection_age_ms, "--max-connection-age-ms"},
      {&TransportOptions::max_connection_age_grace_ms, "--max-connection-age-grace-ms"},
  };
  for (const auto& [field, flag] : fields) {
    TransportOptions o;
    o.*field = -1;
    const absl::Status s = o.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << flag;
    EXPECT_THAT(s.message(), HasSubstr(flag));
  }
}

TEST(TransportOptions, ZeroTurnsOffTheLimitsButNotTheKeepalive) {
  TransportOptions o;
  o.max_concurrent_streams = o.max_connection_idle_ms = o.max_connection_age_ms = 0;
  o.min_client_ping_interval_ms = o.max_connection_age_grace_ms = 0;
  EXPECT_TRUE(o.Validate().ok());
  o.keepalive_time_ms = 0;
  EXPECT_THAT(o.Validate().message(), HasSubstr("--keepalive-time-ms"));
  o = TransportOptions();
  o.keepalive_timeout_ms = 0;
  EXPECT_THAT(o.Validate().message(), HasSubstr("--keepalive-timeout-ms"));
}

TEST(TransportOptions, AKeepaliveTimeoutAtGrpcsBackupPollOrBelowIsWarnedAbout) {
  TransportOptions o;
  EXPECT_EQ(o.Warning(), "");
  o.keepalive_timeout_ms = 5000;
  EXPECT_THAT(o.Warning(), HasSubstr("--keepalive-timeout-ms 5000"));
}

}  // namespace
}  // namespace kvs
