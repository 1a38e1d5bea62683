// KvSessionClient: a C++ client of the kvsession.v1 API over gRPC.
//
// Thin, synchronous wrappers around the generated stub that return
// absl::Status(Or) with the server's code and message; Generate gathers the
// stream (and reports each message as it arrives). One client may be used
// from several threads at once (gRPC channels and stubs are thread-safe).
#ifndef KVSESSION_CLIENT_KVSESSION_CLIENT_H_
#define KVSESSION_CLIENT_KVSESSION_CLIENT_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "client/client_security.h"
#include "kvsession/v1/kvsession.grpc.pb.h"

namespace kvs {

// The whole of one Generate call.
struct GenerateResult {
  std::vector<int32_t> ids;
  std::string text;
  kvsession::v1::FinishReason finish_reason = kvsession::v1::FINISH_REASON_UNSPECIFIED;
  kvsession::v1::Usage usage;
  std::string error_message;
  std::vector<kvsession::v1::TokenLogprobs> logprobs;
  int messages = 0;  // stream messages received
};

class KvSessionClient {
 public:
  // Connects (lazily) to `address` ("host:port") without TLS.
  explicit KvSessionClient(const std::string& address);
  // Connects with TLS (when `security.tls`) and sends `security.api_key`
  // (when set) as `authorization: Bearer KEY` and `security.as_tenant`
  // (when set) as `x-kvsession-tenant: T` on every call.
  KvSessionClient(const std::string& address, const ClientSecurity& security);

  // Waits until the channel is connected or `timeout` passes.
  bool WaitForServer(std::chrono::milliseconds timeout);
  // A deadline for every unary call made through the methods below
  // (DEADLINE_EXCEEDED past it); unset (the default): none. Generate takes
  // its own. Set before making calls.
  void SetUnaryTimeout(std::optional<std::chrono::milliseconds> timeout) { unary_timeout_ = timeout; }

  absl::StatusOr<kvsession::v1::Session> CreateSession(
      const kvsession::v1::CreateSessionRequest& request);
  absl::StatusOr<kvsession::v1::Session> CreateSession(const std::string& text);
  absl::StatusOr<kvsession::v1::AppendResponse> Append(const std::string& session_id,
                                                       const std::string& text);
  absl::StatusOr<kvsession::v1::AppendResponse> Append(const kvsession::v1::AppendRequest& request);

  // Streams a generation. `on_message` sees each message as it arrives and
  // may return false to cancel the call (the result then holds what came
  // before, and the status is CANCELLED). `timeout` sets a deadline.
  absl::StatusOr<GenerateResult> Generate(
      const kvsession::v1::GenerateRequest& request,
      std::function<bool(const kvsession::v1::GenerateResponse&)> on_message = nullptr,
      std::optional<std::chrono::milliseconds> timeout = std::nullopt,
      GenerateResult* partial = nullptr);

  absl::StatusOr<kvsession::v1::ForkResponse> Fork(const kvsession::v1::ForkRequest& request);
  absl::StatusOr<kvsession::v1::Checkpoint> Snapshot(const std::string& session_id,
                                                     const std::string& name = "");
  absl::StatusOr<kvsession::v1::Session> RestoreCheckpoint(const std::string& checkpoint_id);
  absl::StatusOr<kvsession::v1::Session> RestoreSession(const std::string& session_id);
  absl::StatusOr<kvsession::v1::Session> GetSession(const std::string& session_id,
                                                    bool include_tokens = false,
                                                    bool include_text = false);
  absl::StatusOr<kvsession::v1::ListSessionsResponse> ListSessions(int page_size,
                                                                   const std::string& page_token);
  // Every session (follows the pages).
  absl::StatusOr<std::vector<kvsession::v1::Session>> ListAllSessions();
  absl::Status DeleteSession(const std::string& session_id);
  absl::StatusOr<kvsession::v1::ListCheckpointsResponse> ListCheckpoints(
      const std::string& session_id, int page_size = 0, const std::string& page_token = "");
  // Every checkpoint of the session ("" = all; follows the pages).
  absl::StatusOr<std::vector<kvsession::v1::Checkpoint>> ListAllCheckpoints(const std::string& session_id);
  absl::Status DeleteCheckpoint(const std::string& checkpoint_id);
  absl::StatusOr<kvsession::v1::ServerInfo> GetServerInfo();
  // Cuts the session to its first `length` tokens (proto TruncateRequest).
  absl::StatusOr<kvsession::v1::TruncateResponse> Truncate(const std::string& session_id, int length);
  // The token ids the request's input would add (proto TokenizeRequest);
  // changes nothing.
  absl::StatusOr<kvsession::v1::TokenizeResponse> Tokenize(const kvsession::v1::TokenizeRequest& request);

  kvsession::v1::KvSession::Stub* stub() { return stub_.get(); }
  // Adds this client's credentials (the API key, the tenant it acts for) to a context for a call
  // made through stub() directly, and the route header of `id` (the
  // session or checkpoint id the call names; AddRouteHeader).
  void PrepareContext(grpc::ClientContext* ctx, std::string_view id = {}) const;

  // `observer` sees, after every call made through this client's methods,
  // the replica that answered it (the x-kvsession-replica response header;
  // "" when there was none, e.g. a proxy's own error). Set it before
  // making calls; it runs on the calling thread.
  void OnReplica(std::function<void(const std::string&)> observer);

 private:
  template <typename Response, typename Call>
  absl::StatusOr<Response> Unary(std::string_view id, Call call);

  std::optional<std::chrono::milliseconds> unary_timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<kvsession::v1::KvSession::Stub> stub_;
  struct CallHeaders {
    std::string api_key;
    std::string as_tenant;
  };
  CallHeaders headers_;
  std::function<void(const std::string&)> replica_observer_;
};

// Fleet routing (docs/fleet.md): adds `x-kvsession-route: KEY` when `id`
// ("ses_KEY.HEX" / "ckpt_KEY.HEX") carries a route key; nothing for an id
// without one or an empty id (CreateSession: the proxy picks a replica).
void AddRouteHeader(std::string_view id, grpc::ClientContext* ctx);

// grpc::Status -> absl::Status (same code and message).
absl::Status FromGrpc(const grpc::Status& s);

// "stop_token", "stop_sequence", "length", "cancelled", "error", "".
std::string FinishReasonName(kvsession::v1::FinishReason r);

}  // namespace kvs

#endif  // KVSESSION_CLIENT_KVSESSION_CLIENT_H_
