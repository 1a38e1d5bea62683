// SessionOwnership: the AccessPolicy that keeps tenants apart.
//
// A request naming a session or checkpoint (a field `session_id` or
// `checkpoint_id`, wherever a request type has one) by a well-formed id
// that is not one the caller can see gets NOT_FOUND "no session 'ID'" /
// "no checkpoint 'ID'" here, before the handler runs: an id that does not
// exist and an id of another tenant take the very same path. Both are one
// lookup in the in-memory registry under its mutex that copies nothing
// (SessionManager::SessionVisibleTo / CheckpointVisibleTo: find, compare
// the owner), then the same message is built from the id the caller sent;
// no disk, no hop to the I/O thread, no argument check runs for either.
// So neither the status (code and message) nor the path taken, hence the
// timing, tells a tenant whether another tenant's id exists, even when the
// request also has an invalid argument (that one is INVALID_ARGUMENT only
// for the caller's own ids). Handlers thus only ever see the caller's own
// ids (or one deleted in between: the handler's NOT_FOUND, same message).
//
// Passed through: malformed ids (the handler's INVALID_ARGUMENT: no such
// id can exist, so it reveals nothing), empty ids (Tokenize without a
// session), ListCheckpoints (its session_id filters, and it lists only the
// caller's own checkpoints, so a deleted session's checkpoints stay
// listable). An admin (acting for no tenant) may name anyone's.
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
