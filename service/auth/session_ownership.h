// SessionOwnership: the AccessPolicy that keeps tenants apart. A request
// naming (in a field `session_id` or `checkpoint_id`, wherever a request
// type has one) a session or checkpoint of another tenant gets NOT_FOUND
// "no session 'ID'" / "no checkpoint 'ID'", the status the handler gives
// for an id that does not exist; an admin may name anyone's. Ids that do
// not exist or are malformed pass through (the handler answers them as
// before), as does ListCheckpoints (it lists only the caller's own).
//
// Borrows the SessionManager (must outlive it). Thread-safe; reads only the
// registry (no disk).
#ifndef KVSESSION_SERVICE_AUTH_SESSION_OWNERSHIP_H_
#define KVSESSION_SERVICE_AUTH_SESSION_OWNERSHIP_H_

#include "service/auth/access_policy.h"
#include "service/session_manager.h"

namespace kvs {

class SessionOwnership final : public AccessPolicy {
 public:
  explicit SessionOwnership(const SessionManager* sessions) : sessions_(sessions) {}
  absl::Status Check(const Principal& caller, const google::protobuf::Message& request) const override;

 private:
  const SessionManager* const sessions_;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_AUTH_SESSION_OWNERSHIP_H_
