#include "service/rpc_metrics.h"

#include <chrono>

#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>

#include "kvsession/v1/kvsession.grpc.pb.h"
#include "service/grpc_status.h"

namespace kvs {
namespace {

using grpc::experimental::InterceptionHookPoints;

// One call's interceptor: its start time, recorded when its status is sent.
class CallInterceptor : public grpc::experimental::Interceptor {
 public:
  CallInterceptor(RpcMetrics* metrics, int method) : metrics_(metrics), method_(method) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (!recorded_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      recorded_ = true;
      metrics_->Record(method_, static_cast<int>(methods->GetSendStatus().error_code()),
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    }
    methods->Proceed();
  }

 private:
  RpcMetrics* const metrics_;
  const int method_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  bool recorded_ = false;
};

class Factory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(RpcMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    const int method = metrics_->MethodIndex(info->method() == nullptr ? "" : info->method());
    return method < 0 ? nullptr : new CallInterceptor(metrics_, method);
  }

 private:
  RpcMetrics* const metrics_;
};

}  // namespace

RpcMetrics::RpcMetrics(metrics::Registry* registry) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          kvsession::v1::KvSession::service_full_name());
  for (int i = 0; i < service->method_count(); ++i) {
    Method m;
    m.name = service->method(i)->name();
    m.full_name = "/" + service->full_name() + "/" + m.name;
    m.calls = std::make_unique<std::array<std::atomic<int64_t>, kCodes>>();
    for (auto& c : *m.calls) c.store(0, std::memory_order_relaxed);
    m.latency = registry->AddHistogram("kvsession_request_duration_seconds",
                                       "Seconds from a call's start to its status, by method.",
                                       metrics::LatencyBuckets(), {{"method", m.name}});
    methods_.push_back(std::move(m));
  }
  registry->AddCollector([this](metrics::Exposition& out) { Collect(out); });
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> RpcMetrics::InterceptorFactory() {
  return std::make_unique<Factory>(this);
}

int RpcMetrics::MethodIndex(std::string_view full_method) const {
  for (size_t i = 0; i < methods_.size(); ++i) {
    if (methods_[i].full_name == full_method) return static_cast<int>(i);
  }
  return -1;
}

void RpcMetrics::Record(int index, int code, double seconds) {
  if (index < 0 || index >= static_cast<int>(methods_.size())) return;
  if (code < 0 || code >= kCodes) code = static_cast<int>(grpc::StatusCode::UNKNOWN);
  (*methods_[index].calls)[code].fetch_add(1, std::memory_order_relaxed);
  methods_[index].latency->Observe(seconds);
}

void RpcMetrics::Collect(metrics::Exposition& out) const {
  out.Family("kvsession_requests_total", "Calls by method and final gRPC status code.", "counter");
  for (const Method& m : methods_) {
    for (int code = 0; code < kCodes; ++code) {
      const int64_t n = (*m.calls)[code].load(std::memory_order_relaxed);
      if (n > 0) out.Sample("kvsession_requests_total", {{"method", m.name}, {"code", GrpcCodeName(code)}}, n);
    }
  }
}

}  // namespace kvs
