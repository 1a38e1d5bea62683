// AccessPolicy: decides, before a method's handler runs, whether the
// authenticated caller may make this request (ParsingCallbackService asks
// it for every parsed request). Implementations: session_ownership.h.
//
// Check returns OK or the status the call ends with (the handler does not
// run then). Implementations are thread-safe (called from gRPC threads).
#ifndef KVSESSION_SERVICE_AUTH_ACCESS_POLICY_H_
#define KVSESSION_SERVICE_AUTH_ACCESS_POLICY_H_

#include <google/protobuf/message.h>

#include "absl/status/status.h"
#include "service/auth/principal.h"

namespace kvs {

class AccessPolicy {
 public:
  virtual ~AccessPolicy() = default;
  virtual absl::Status Check(const Principal& caller, const google::protobuf::Message& request) const = 0;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_AUTH_ACCESS_POLICY_H_
