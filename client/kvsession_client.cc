#include "client/kvsession_client.h"

#include "proto/route_key.h"

namespace kvs {
namespace v1 = kvsession::v1;

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

std::string FinishReasonName(v1::FinishReason r) {
  switch (r) {
    case v1::FINISH_REASON_STOP_TOKEN: return "stop_token";
    case v1::FINISH_REASON_STOP_SEQUENCE: return "stop_sequence";
    case v1::FINISH_REASON_LENGTH: return "length";
    case v1::FINISH_REASON_CANCELLED: return "cancelled";
    case v1::FINISH_REASON_ERROR: return "error";
    default: return "";
  }
}

namespace {

template <typename Headers>
void AddApiKey(const Headers& headers, grpc::ClientContext* ctx) {
  if (!headers.api_key.empty()) ctx->AddMetadata("authorization", "Bearer " + headers.api_key);
  if (!headers.as_tenant.empty()) ctx->AddMetadata("x-kvsession-tenant", headers.as_tenant);
}

// The replica header of a finished call: initial metadata, else trailing.
std::string ReplicaOf(const grpc::ClientContext& ctx) {
  for (const auto* md : {&ctx.GetServerInitialMetadata(), &ctx.GetServerTrailingMetadata()}) {
    auto it = md->find(kReplicaHeader);
    if (it != md->end()) return std::string(it->second.data(), it->second.size());
  }
  return "";
}

}  // namespace

void AddRouteHeader(std::string_view id, grpc::ClientContext* ctx) {
  const std::string_view key = RouteKeyOf(id);
  if (!key.empty()) ctx->AddMetadata(kRouteHeader, std::string(key));
}

// Calls a unary stub method (routed by `id`, see AddRouteHeader) and
// converts the result.
template <typename Response, typename Call>
absl::StatusOr<Response> KvSessionClient::Unary(std::string_view id, Call call) {
  grpc::ClientContext ctx;
  PrepareContext(&ctx, id);
  if (unary_timeout_) ctx.set_deadline(std::chrono::system_clock::now() + *unary_timeout_);
  Response response;
  grpc::Status s = call(&ctx, &response);
  if (replica_observer_) replica_observer_(ReplicaOf(ctx));
  if (!s.ok()) return FromGrpc(s);
  return response;
}

KvSessionClient::KvSessionClient(const std::string& address)
    : channel_(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())),
      stub_(v1::KvSession::NewStub(channel_)) {}

KvSessionClient::KvSessionClient(const std::string& address, const ClientSecurity& security)
    : channel_(grpc::CreateChannel(address, ChannelCredentialsFor(security))),
      stub_(v1::KvSession::NewStub(channel_)),
      headers_{security.api_key, security.as_tenant} {}

void KvSessionClient::PrepareContext(grpc::ClientContext* ctx, std::string_view id) const {
  AddApiKey(headers_, ctx);
  AddRouteHeader(id, ctx);
}

void KvSessionClient::OnReplica(std::function<void(const std::string&)> observer) {
  replica_observer_ = std::move(observer);
}

bool KvSessionClient::WaitForServer(std::chrono::milliseconds timeout) {
  return channel_->WaitForConnected(std::chrono::system_clock::now() + timeout);
}

absl::StatusOr<v1::Session> KvSessionClient::CreateSession(const v1::CreateSessionRequest& request) {
  return Unary<v1::Session>({}, [&](grpc::ClientContext* c, v1::Session* r) {
    return stub_->CreateSession(c, request, r);
  });
}

absl::StatusOr<v1::Session> KvSessionClient::CreateSession(const std::string& text) {
  v1::CreateSessionRequest request;
  if (!text.empty()) request.mutable_input()->set_text(text);
  return CreateSession(request);
}

absl::StatusOr<v1::AppendResponse> KvSessionClient::Append(const v1::AppendRequest& request) {
  return Unary<v1::AppendResponse>(request.session_id(), [&](grpc::ClientContext* c, v1::AppendResponse* r) {
    return stub_->Append(c, request, r);
  });
}

absl::StatusOr<v1::AppendResponse> KvSessionClient::Append(const std::string& session_id,
                                                           const std::string& text) {
  v1::AppendRequest request;
  request.set_session_id(session_id);
  request.mutable_input()->set_text(text);
  return Append(request);
}

absl::StatusOr<GenerateResult> KvSessionClient::Generate(
    const v1::GenerateRequest& request, std::function<bool(const v1::GenerateResponse&)> on_message,
    std::optional<std::chrono::milliseconds> timeout, GenerateResult* partial) {
  grpc::ClientContext ctx;
  PrepareContext(&ctx, request.session_id());
  if (timeout) ctx.set_deadline(std::chrono::system_clock::now() + *timeout);
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader = stub_->Generate(&ctx, request);
  GenerateResult result;
  v1::GenerateResponse message;
  bool cancelled = false;
  while (reader->Read(&message)) {
    ++result.messages;
    result.ids.insert(result.ids.end(), message.token_ids().begin(), message.token_ids().end());
    result.text += message.text();
    for (const auto& lp : message.logprobs()) result.logprobs.push_back(lp);
    if (message.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      result.finish_reason = message.finish_reason();
      result.usage = message.usage();
      result.error_message = message.error_message();
    }
    if (on_message && !cancelled && !on_message(message)) {
      cancelled = true;
      ctx.TryCancel();
    }
  }
  grpc::Status s = reader->Finish();
  if (replica_observer_) replica_observer_(ReplicaOf(ctx));
  if (partial != nullptr) *partial = result;
  if (!s.ok()) return FromGrpc(s);
  return result;
}

absl::StatusOr<v1::ForkResponse> KvSessionClient::Fork(const v1::ForkRequest& request) {
  return Unary<v1::ForkResponse>(request.session_id(), [&](grpc::ClientContext* c, v1::ForkResponse* r) {
    return stub_->Fork(c, request, r);
  });
}

absl::StatusOr<v1::TruncateResponse> KvSessionClient::Truncate(const std::string& session_id,
                                                               int length) {
  v1::TruncateRequest request;
  request.set_session_id(session_id);
  request.set_length(length);
  return Unary<v1::TruncateResponse>(session_id, [&](grpc::ClientContext* c, v1::TruncateResponse* r) {
    return stub_->Truncate(c, request, r);
  });
}

absl::StatusOr<v1::TokenizeResponse> KvSessionClient::Tokenize(const v1::TokenizeRequest& request) {
  return Unary<v1::TokenizeResponse>(request.session_id(), [&](grpc::ClientContext* c, v1::TokenizeResponse* r) {
    return stub_->Tokenize(c, request, r);
  });
}

absl::StatusOr<v1::Checkpoint> KvSessionClient::Snapshot(const std::string& session_id,
                                                         const std::string& name) {
  v1::SnapshotRequest request;
  request.set_session_id(session_id);
  request.set_name(name);
  return Unary<v1::Checkpoint>(session_id, [&](grpc::ClientContext* c, v1::Checkpoint* r) {
    return stub_->Snapshot(c, request, r);
  });
}

absl::StatusOr<v1::Session> KvSessionClient::RestoreCheckpoint(const std::string& checkpoint_id) {
  v1::RestoreRequest request;
  request.set_checkpoint_id(checkpoint_id);
  return Unary<v1::Session>(checkpoint_id, [&](grpc::ClientContext* c, v1::Session* r) {
    return stub_->Restore(c, request, r);
  });
}

absl::StatusOr<v1::Session> KvSessionClient::RestoreSession(const std::string& session_id) {
  v1::RestoreRequest request;
  request.set_session_id(session_id);
  return Unary<v1::Session>(session_id, [&](grpc::ClientContext* c, v1::Session* r) {
    return stub_->Restore(c, request, r);
  });
}

absl::StatusOr<v1::Session> KvSessionClient::GetSession(const std::string& session_id,
                                                        bool include_tokens, bool include_text) {
  v1::GetSessionRequest request;
  request.set_session_id(session_id);
  request.set_include_token_ids(include_tokens);
  request.set_include_text(include_text);
  return Unary<v1::Session>(session_id, [&](grpc::ClientContext* c, v1::Session* r) {
    return stub_->GetSession(c, request, r);
  });
}

absl::StatusOr<v1::ListSessionsResponse> KvSessionClient::ListSessions(int page_size,
                                                                       const std::string& page_token) {
  v1::ListSessionsRequest request;
  request.set_page_size(page_size);
  request.set_page_token(page_token);
  return Unary<v1::ListSessionsResponse>({}, [&](grpc::ClientContext* c, v1::ListSessionsResponse* r) {
    return stub_->ListSessions(c, request, r);
  });
}

absl::StatusOr<std::vector<v1::Session>> KvSessionClient::ListAllSessions() {
  std::vector<v1::Session> all;
  std::string token;
  do {
    absl::StatusOr<v1::ListSessionsResponse> page = ListSessions(1000, token);
    if (!page.ok()) return page.status();
    all.insert(all.end(), page->sessions().begin(), page->sessions().end());
    token = page->next_page_token();
  } while (!token.empty());
  return all;
}

absl::Status KvSessionClient::DeleteSession(const std::string& session_id) {
  v1::DeleteSessionRequest request;
  request.set_session_id(session_id);
  return Unary<v1::DeleteSessionResponse>(session_id, [&](grpc::ClientContext* c, v1::DeleteSessionResponse* r) {
           return stub_->DeleteSession(c, request, r);
         }).status();
}

absl::StatusOr<v1::ListCheckpointsResponse> KvSessionClient::ListCheckpoints(
    const std::string& session_id, int page_size, const std::string& page_token) {
  v1::ListCheckpointsRequest request;
  request.set_session_id(session_id);
  request.set_page_size(page_size);
  request.set_page_token(page_token);
  return Unary<v1::ListCheckpointsResponse>(session_id,
      [&](grpc::ClientContext* c, v1::ListCheckpointsResponse* r) {
        return stub_->ListCheckpoints(c, request, r);
      });
}

absl::StatusOr<std::vector<v1::Checkpoint>> KvSessionClient::ListAllCheckpoints(const std::string& session_id) {
  std::vector<v1::Checkpoint> all;
  std::string token;
  do {
    absl::StatusOr<v1::ListCheckpointsResponse> page = ListCheckpoints(session_id, 1000, token);
    if (!page.ok()) return page.status();
    all.insert(all.end(), page->checkpoints().begin(), page->checkpoints().end());
    token = page->next_page_token();
  } while (!token.empty());
  return all;
}

absl::Status KvSessionClient::DeleteCheckpoint(const std::string& checkpoint_id) {
  v1::DeleteCheckpointRequest request;
  request.set_checkpoint_id(checkpoint_id);
  return Unary<v1::DeleteCheckpointResponse>(checkpoint_id,
             [&](grpc::ClientContext* c, v1::DeleteCheckpointResponse* r) {
               return stub_->DeleteCheckpoint(c, request, r);
             })
      .status();
}

absl::StatusOr<v1::ServerInfo> KvSessionClient::GetServerInfo() {
  v1::GetServerInfoRequest request;
  return Unary<v1::ServerInfo>({}, [&](grpc::ClientContext* c, v1::ServerInfo* r) {
    return stub_->GetServerInfo(c, request, r);
  });
}

}  // namespace kvs
