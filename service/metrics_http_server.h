// MetricsHttpServer: the HTTP endpoint of `kvsessiond --metrics-listen`
// (cpp-httplib), answering
//   GET /metrics  200, the registry in the Prometheus text format
//                 (Content-Type: text/plain; version=0.0.4);
//   GET /healthz  200 "ok" while the process runs (liveness);
//   GET /readyz   200 "ready" while SetReady(true), else 503 "not ready"
//                 (starting: the model is loading; draining after SIGTERM).
// Anything else is 404. Requests are served by a small pool of threads of
// its own (4); a scrape never touches the gRPC threads. A connection
// serves one request, and one that sends nothing is closed after 1 s, so a
// few idle clients cannot starve the probes; more could (a thread per
// connection), so the port belongs on a network only the scraper and the
// kubelet reach (docs/operations.md).
//
// Ownership: borrows the registry, which must outlive the server.
// Thread safety: SetReady may be called from any thread; Start once, then
// Stop (or the destructor) once.
#ifndef KVSESSION_SERVICE_METRICS_HTTP_SERVER_H_
#define KVSESSION_SERVICE_METRICS_HTTP_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "service/metrics_registry.h"

namespace httplib {
class Server;
}

namespace kvs {

class MetricsHttpServer {
 public:
  explicit MetricsHttpServer(const metrics::Registry* registry);
  ~MetricsHttpServer();  // Stop()
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds `address` ("host:port", "[v6]:port"; port 0 picks one) and serves
  // from a thread of its own. Returns the bound port, or INVALID_ARGUMENT
  // for an address that does not parse, UNAVAILABLE when it cannot bind;
  // on error nothing is served.
  absl::StatusOr<int> Start(const std::string& address);
  // Stops serving and joins its threads. Idempotent.
  void Stop();

  void SetReady(bool ready) { ready_.store(ready, std::memory_order_release); }
  bool ready() const { return ready_.load(std::memory_order_acquire); }

 private:
  const metrics::Registry* const registry_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  std::atomic<bool> ready_{false};
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_METRICS_HTTP_SERVER_H_
