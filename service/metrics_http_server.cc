#include "service/metrics_http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "service/request_checks.h"

namespace kvs {
namespace {

constexpr size_t kHttpThreads = 4;

}  // namespace

MetricsHttpServer::MetricsHttpServer(const metrics::Registry* registry)
    : registry_(registry), http_(std::make_unique<httplib::Server>()) {
  // Scrapes and probes are rare and small, but cpp-httplib gives each
  // connection a thread for its whole life: one request per connection,
  // and a connection that sends nothing is closed after a second, so a few
  // idle or slow clients cannot keep a liveness probe waiting (a probe
  // times out in 1 s by default, and kubelet restarts the pod after three).
  http_->new_task_queue = [] { return new httplib::ThreadPool(kHttpThreads); };
  http_->set_keep_alive_max_count(1);
  http_->set_read_timeout(1, 0);
  // SO_REUSEADDR only: cpp-httplib's default also sets SO_REUSEPORT, which
  // would let a second server bind the same port and take half the scrapes.
  http_->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry_->Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  http_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  http_->Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    if (ready()) {
      res.set_content("ready\n", "text/plain");
    } else {
      res.status = 503;
      res.set_content("not ready\n", "text/plain");
    }
  });
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::StatusOr<int> MetricsHttpServer::Start(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen ", Quote(address), " is not host:port"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  const int bound = port == 0 ? http_->bind_to_any_port(host) : (http_->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) return absl::UnavailableError(absl::StrCat("cannot listen on ", Quote(address), " for metrics"));
  auto listen_returned = std::make_shared<std::atomic<bool>>(false);
  thread_ = std::thread([this, listen_returned] {
    http_->listen_after_bind();
    listen_returned->store(true);
  });
  // Running before returning, so a Stop() right after cannot miss it (the
  // socket is bound already: connections queue until then).
  while (!http_->is_running() && !listen_returned->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return bound;
}

void MetricsHttpServer::Stop() {
  if (!thread_.joinable()) return;
  http_->stop();
  thread_.join();
}

}  // namespace kvs
