// The metrics HTTP endpoint over a real loopback socket.
#include "service/metrics_http_server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

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

// Connections that send nothing hold a thread each until they are closed:
// three of them must not keep a liveness probe waiting (kubelet's times
// out in 1 s, and three failures restart the pod).
TEST(MetricsHttpServer, IdleConnectionsDoNotKeepTheHealthProbeWaiting) {
  metrics::Registry registry;
  MetricsHttpServer server(&registry);
  absl::StatusOr<int> port = server.Start("127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  std::vector<int> idle;
  for (int i = 0; i < 3; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(*port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    idle.push_back(fd);
  }
  httplib::Client client("127.0.0.1", *port);
  client.set_read_timeout(1, 0);  // as a probe waits
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health) << "the probe waited past its timeout";
  EXPECT_EQ(health->status, 200);
  for (int fd : idle) close(fd);
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
