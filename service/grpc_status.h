// absl::Status -> grpc::Status: the same code (absl's codes are gRPC's
// numbers) and the same message; and a code's canonical name. Pure;
// thread-safe.
#ifndef KVSESSION_SERVICE_GRPC_STATUS_H_
#define KVSESSION_SERVICE_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace kvs {

grpc::Status ToGrpc(const absl::Status& s);

// "OK", "INVALID_ARGUMENT", ... for a gRPC status code; "UNKNOWN" for a
// number that is not one (metrics labels and audit lines use these).
std::string GrpcCodeName(int code);

}  // namespace kvs

#endif  // KVSESSION_SERVICE_GRPC_STATUS_H_
