#include "service/grpc_status.h"

#include <string>

namespace kvs {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

std::string GrpcCodeName(int code) {
  if (code < 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) return "UNKNOWN";
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

}  // namespace kvs
