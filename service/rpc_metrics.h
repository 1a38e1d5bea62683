// RpcMetrics: every kvsession.v1.KvSession call counted by method and
// final gRPC status code, with its latency, as
//   kvsession_requests_total{method="CreateSession",code="OK"}
//   kvsession_request_duration_seconds{method="..."}  (histogram)
//
// Counted by a gRPC server interceptor (InterceptorFactory(), given to the
// ServerBuilder): the one place every call passes through whatever its
// handler does, including requests that do not parse
// (service/parsing_callback_service.h answers those itself) and calls
// whose reactor finishes on another thread. The latency runs from the
// call's start (before its request is read) to the moment its status is
// sent. Health and reflection calls are not counted. Methods are taken
// from the service descriptor, so an RPC added to the .proto is counted
// without a change here. A (method, code) series appears once a call
// ended with it.
//
// Ownership: the registry must outlive this; this must outlive the server
// the factory is given to. Thread safety: all methods may be called from
// any thread; recording is lock-free and allocates nothing.
#ifndef KVSESSION_SERVICE_RPC_METRICS_H_
#define KVSESSION_SERVICE_RPC_METRICS_H_

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/support/server_interceptor.h>

#include "service/metrics_registry.h"

namespace kvs {

class RpcMetrics {
 public:
  explicit RpcMetrics(metrics::Registry* registry);
  RpcMetrics(const RpcMetrics&) = delete;
  RpcMetrics& operator=(const RpcMetrics&) = delete;

  // A factory to give grpc::ServerBuilder::experimental().SetInterceptorCreators.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> InterceptorFactory();

  // The index of a full method name ("/kvsession.v1.KvSession/Fork"), or -1.
  int MethodIndex(std::string_view full_method) const;
  // Records one call of method `index` that ended with `code` after `seconds`.
  void Record(int index, int code, double seconds);

 private:
  static constexpr int kCodes = 17;  // grpc::StatusCode OK .. UNAUTHENTICATED
  struct Method {
    std::string full_name;  // "/kvsession.v1.KvSession/Fork"
    std::string name;       // "Fork"
    std::unique_ptr<std::array<std::atomic<int64_t>, kCodes>> calls;
    metrics::Histogram* latency = nullptr;
  };
  void Collect(metrics::Exposition& out) const;

  std::vector<Method> methods_;  // fixed after construction
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_RPC_METRICS_H_
