// Authenticator: maps a call's `authorization: Bearer KEY` header to the
// Principal whose key it is, using the --auth-keys file (api_key_file.h).
//
// The presented key is hashed (SHA-256) and compared with every entry's
// hash in constant time (CRYPTO_memcmp, no early exit), so neither the
// answer's timing nor any message reveals how close a wrong key was. No
// message, log line or status ever contains the key or its hash.
//
// Statuses of Authenticate: UNAUTHENTICATED "missing API key (send
// authorization: Bearer KEY)" when there is no authorization header,
// UNAUTHENTICATED "malformed authorization header (expected Bearer KEY)"
// when it is not a Bearer token, UNAUTHENTICATED "invalid API key" when no
// entry matches.
//
// Reload re-reads the file (SIGHUP): on success the new keys answer every
// later call; on error the old keys stay in force and nothing changes.
//
// Thread safety: Authenticate and Reload may run concurrently from any
// threads (the key table is swapped under a mutex, read as a shared_ptr).
#ifndef KVSESSION_SERVICE_AUTH_AUTHENTICATOR_H_
#define KVSESSION_SERVICE_AUTH_AUTHENTICATOR_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "service/auth/api_key_file.h"
#include "service/auth/principal.h"

namespace kvs {

class Authenticator {
 public:
  // Loads `path` (LoadApiKeyFile's statuses).
  static absl::StatusOr<std::unique_ptr<Authenticator>> FromFile(const std::string& path);
  // Keys from a parsed file (tests); Reload then fails (no path).
  explicit Authenticator(ApiKeyFile keys, std::string path = "");

  // `authorization`: the header's value, nullopt when absent.
  absl::StatusOr<Principal> Authenticate(std::optional<std::string_view> authorization) const;

  // Re-reads the file; returns what it loaded (now in force), or the error
  // (the old keys stay then; FAILED_PRECONDITION when built without a path).
  absl::StatusOr<ApiKeyFile> Reload();

  const std::string& path() const { return path_; }

 private:
  std::shared_ptr<const ApiKeyFile> keys() const;

  const std::string path_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const ApiKeyFile> keys_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_AUTH_AUTHENTICATOR_H_
