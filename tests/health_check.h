// Test helper: a grpc.health.v1.Health/Check call made with gRPC's generic
// stub (Debian ships no health.proto stubs). The messages are one field
// each: HealthCheckRequest{string service = 1},
// HealthCheckResponse{ServingStatus status = 1} (1 SERVING, 2 NOT_SERVING).
#ifndef KVSESSION_TESTS_HEALTH_CHECK_H_
#define KVSESSION_TESTS_HEALTH_CHECK_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <future>
#include <string>

namespace kvs {

enum class Health { kServing, kNotServing, kNotFound, kUnavailable, kOther };

inline Health CheckHealth(const std::string& address, const std::string& service) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  std::string request;
  if (!service.empty()) {
    request.push_back(0x0a);
    request.push_back(static_cast<char>(service.size()));
    request += service;
  }
  grpc::Slice slice(request);
  grpc::ByteBuffer req(&slice, 1), resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &req, &resp,
                 [&](grpc::Status s) { done.set_value(s); });
  grpc::Status st = done.get_future().get();
  if (st.error_code() == grpc::StatusCode::NOT_FOUND) return Health::kNotFound;
  if (st.error_code() == grpc::StatusCode::UNAVAILABLE) return Health::kUnavailable;
  if (!st.ok()) return Health::kOther;
  std::vector<grpc::Slice> slices;
  (void)resp.Dump(&slices);
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  if (bytes == std::string("\x08\x01", 2)) return Health::kServing;
  if (bytes == std::string("\x08\x02", 2)) return Health::kNotServing;
  return Health::kOther;
}

}  // namespace kvs

#endif  // KVSESSION_TESTS_HEALTH_CHECK_H_
