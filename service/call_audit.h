// CallAudit: kvsessiond --audit-log PATH, one structured JSON line per
// mutating call, and (with --auth-keys and --metrics-listen) the per-tenant
// counter kvsession_tenant_requests_total{tenant,method,code}.
//
// Mutating methods are one table (kAuditedMethods in call_audit.cc; every
// method of the service descriptor is listed there as mutating or not, and
// a method missing from it is audited, so an RPC added to the .proto is
// logged until someone decides otherwise). A line is written when the
// call's status is sent (the call ends), flushed at once, and looks like
//   {"time":"2026-11-23T16:40:00.123Z","tenant":"acme","method":"Fork",
//    "session_id":"ses_...","created":["ses_...","ses_..."],"code":"OK",
//    "latency_ms":12.5}
// Fields: time (UTC, ms), tenant (null for a call that did not
// authenticate), acting_admin (only when an admin key acted for `tenant`),
// method, session_id / checkpoint_id (as the request named them, when
// set), created (ids the call made: CreateSession's session, the session
// Restore{checkpoint_id} made, Fork's branches, Snapshot's checkpoint),
// code (the gRPC status code's
// name), prompt_tokens / cached_tokens / generated_tokens (from the
// response's Usage, when it has one), session_tokens (the session's length
// after the call, when the response holds the session), latency_ms (call
// start to status). A call refused for its x-kvsession-tenant header is
// logged under its key's own tenant (the header's value never is).
// Never written: input text or tokens, generated text, status messages,
// labels, names, keys. Strings are JSON-escaped (ids are server-made, but
// whatever a request carried is escaped and cut to 64 bytes).
//
// Counted by a gRPC server interceptor (like rpc_metrics.h): it sees every
// call, including those refused before a handler (UNAUTHENTICATED, a
// request that does not parse, NOT_FOUND from the ownership check). The
// caller is authenticated again from the call's metadata when it arrives
// (call_auth.h), as the handler does, so the tenant is the one the call
// acted as, also when a reload (SIGHUP) removes its key while it runs.
//
// Ownership: the Authenticator (may be null) and Registry (may be null)
// must outlive this; this must outlive the server the factory is given to.
// Thread safety: every method may be called from any thread; writes are
// serialized under a mutex, one whole line per write.
#ifndef KVSESSION_SERVICE_CALL_AUDIT_H_
#define KVSESSION_SERVICE_CALL_AUDIT_H_

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include <grpcpp/support/server_interceptor.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "service/auth/authenticator.h"
#include "service/metrics_registry.h"

namespace kvs {

class CallAudit {
 public:
  // `log_path`: "" (no log), "-" (stderr) or a file opened for appending
  // (created 0600 if missing); FAILED_PRECONDITION naming the path when it
  // cannot be opened. `tenant_metrics`: the registry to count
  // kvsession_tenant_requests_total on, or null.
  static absl::StatusOr<std::unique_ptr<CallAudit>> Create(const std::string& log_path,
                                                          const Authenticator* authenticator,
                                                          metrics::Registry* tenant_metrics);
  ~CallAudit();
  CallAudit(const CallAudit&) = delete;
  CallAudit& operator=(const CallAudit&) = delete;

  // A factory to give grpc::ServerBuilder::experimental().SetInterceptorCreators.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> InterceptorFactory();

  // Whether `method` ("Fork") is audited (mutating, or not in the table).
  static bool IsMutating(std::string_view method);
  // What the log and the metric call a call to `method` (the path's last
  // part): the name of one of the service's methods, else kUnknownMethod,
  // so a client's made-up path (gRPC answers it UNIMPLEMENTED, after the
  // interceptors) never becomes a log string or a new metric series.
  static constexpr char kUnknownMethod[] = "(unknown)";
  static std::string MethodName(std::string_view method);
  // `s` as a JSON string literal (quotes included), at most `max_bytes` of it.
  static std::string JsonString(std::string_view s, size_t max_bytes = 64);

  // Internal (the interceptor): one ended call.
  struct Call;
  void Record(const Call& call);

 private:
  CallAudit(std::FILE* out, bool owned, const Authenticator* authenticator, metrics::Registry* registry);

  std::FILE* const out_;  // null: no log
  const bool owned_;
  const Authenticator* const authenticator_;
  metrics::Registry* const registry_;
  absl::Mutex mu_;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_CALL_AUDIT_H_
