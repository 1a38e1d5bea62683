// absl::Status -> grpc::Status: the same code (absl's codes are gRPC's
// numbers) and the same message. Pure; thread-safe.
#ifndef KVSESSION_SERVICE_GRPC_STATUS_H_
#define KVSESSION_SERVICE_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace kvs {

grpc::Status ToGrpc(const absl::Status& s);

}  // namespace kvs

#endif  // KVSESSION_SERVICE_GRPC_STATUS_H_
