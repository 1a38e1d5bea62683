// The metrics HTTP endpoint over a real loopback socket.
#include "service/metrics_http_server.h"

#include <httplib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kvs {
namespace {

using ::testing::HasSubstr;

TEST(MetricsHttpServer, ServesMetricsHealthAndReadinessOnAPickedPort) {
  metrics::Registry registry;
  registry.AddCounter("kvsession_things_total", "Things.")->Add(2);
  MetricsHttpServer server(&registry);
  absl::StatusOr<int> port = server.Start("127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  ASSERT_GT(*port, 0);
  httplib::Client client("127.0.0.1", *port);

  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_THAT(metrics->get_header_value("Content-Type"), HasSubstr("version=0.0.4"));
  EXPECT_THAT(metrics->body, HasSubstr("kvsession_things_total 2\n"));

  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);

  auto not_ready = client.Get("/readyz");
  ASSERT_TRUE(not_ready);
  EXPECT_EQ(not_ready->status, 503) << "not ready until told";
  server.SetReady(true);
  auto ready = client.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  server.SetReady(false);
  EXPECT_EQ(client.Get("/readyz")->status, 503) << "draining";

  auto missing = client.Get("/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST(MetricsHttpServer, ABadAddressIsInvalidArgumentAndABusyPortUnavailable) {
  metrics::Registry registry;
  MetricsHttpServer bad(&registry);
  EXPECT_EQ(bad.Start("no-port").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.Start("127.0.0.1:99999").status().code(), absl::StatusCode::kInvalidArgument);

  MetricsHttpServer first(&registry);
  absl::StatusOr<int> port = first.Start("127.0.0.1:0");
  ASSERT_TRUE(port.ok());
  MetricsHttpServer second(&registry);
  EXPECT_EQ(second.Start("127.0.0.1:" + std::to_string(*port)).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(MetricsHttpServer, StopsAndCanBeDestroyedWithoutStarting) {
  metrics::Registry registry;
  { MetricsHttpServer never_started(&registry); }
  MetricsHttpServer server(&registry);
  absl::StatusOr<int> port = server.Start("127.0.0.1:0");
  ASSERT_TRUE(port.ok());
  server.Stop();
  server.Stop();
  httplib::Client client("127.0.0.1", *port);
  EXPECT_FALSE(client.Get("/healthz")) << "nothing listens after Stop";
}

}  // namespace
}  // namespace kvs
