#include "service/fleet_routing.h"

#include "absl/strings/str_cat.h"
#include "proto/route_key.h"

namespace kvs {
namespace {

using grpc::experimental::InterceptionHookPoints;

class ReplicaHeader : public grpc::experimental::Interceptor {
 public:
  explicit ReplicaHeader(const std::string* replica) : replica_(replica) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kReplicaHeader, *replica_);
      sent_initial_ = true;
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        !sent_initial_) {
      // A status without initial metadata (an early error): say it there.
      methods->GetSendTrailingMetadata()->emplace(kReplicaHeader, *replica_);
    }
    methods->Proceed();
  }

 private:
  const std::string* const replica_;
  bool sent_initial_ = false;
};

class Factory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(std::string replica) : replica_(std::move(replica)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo*) override {
    return new ReplicaHeader(&replica_);
  }

 private:
  const std::string replica_;
};

}  // namespace

absl::StatusOr<std::string> RouteKeyOfCall(const grpc::ServerContextBase& ctx) {
  const auto& metadata = ctx.client_metadata();
  auto [begin, end] = metadata.equal_range(kRouteHeader);
  if (begin == end) return std::string();
  if (std::next(begin) != end) {
    return absl::InvalidArgumentError(
        absl::StrCat(kRouteHeader, " must be sent at most once"));
  }
  const std::string_view key(begin->second.data(), begin->second.size());
  if (!IsRouteKey(key)) {
    return absl::InvalidArgumentError(absl::StrCat(kRouteHeader, " must be 1 to ", kMaxRouteKeyBytes,
                                                   " of [A-Za-z0-9_-]; got ", key.size(), " bytes"));
  }
  return std::string(key);
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> ReplicaHeaderInterceptors(
    std::string replica) {
  return std::make_unique<Factory>(std::move(replica));
}

bool ValidReplicaName(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  for (char c : name) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

}  // namespace kvs
