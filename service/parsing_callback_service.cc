#include "service/parsing_callback_service.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>

#include "service/auth/call_auth.h"
#include "service/grpc_status.h"
#include "service/request_parser.h"

namespace kvs {
namespace {

namespace v1 = kvsession::v1;

// The index gRPC gives `method` (its position in the service descriptor).
// Aborts if the method is unknown or takes another request type: a
// programming error, seen by every test that starts a server.
int MethodIndex(absl::string_view method, const google::protobuf::Descriptor* request) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          v1::KvSession::service_full_name());
  const google::protobuf::MethodDescriptor* m =
      service == nullptr ? nullptr : service->FindMethodByName(std::string(method));
  if (m == nullptr || m->input_type() != request) {
    std::fprintf(stderr, "ParsingCallbackService: no method %s taking %s\n", std::string(method).c_str(),
                 request->full_name().c_str());
    std::abort();
  }
  return m->index();
}

// A stream that ends at once with `status` (its request did not parse).
template <class Response>
class RejectedWriteReactor : public grpc::ServerWriteReactor<Response> {
 public:
  explicit RejectedWriteReactor(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

// A client stream that ends at once with `status`.
template <class Request>
class RejectedReadReactor : public grpc::ServerReadReactor<Request> {
 public:
  explicit RejectedReadReactor(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

template <class Request, class Response, class Handler>
void ParsingCallbackService::ParseClientStreaming(absl::string_view method, Handler handler) {
  MarkMethodCallback(
      MethodIndex(method, Request::descriptor()),
      new grpc::internal::CallbackClientStreamingHandler<ParsedRequest<Request>, Response>(
          [this, handler](grpc::CallbackServerContext* ctx,
                          Response* response) -> grpc::ServerReadReactor<ParsedRequest<Request>>* {
            const absl::StatusOr<Principal> caller = CallerOf(ctx);
            if (!caller.ok()) {
              return new RejectedReadReactor<ParsedRequest<Request>>(ToGrpc(caller.status()));
            }
            return handler(ctx, response);
          }));
}

grpc::ServerReadReactor<ParsedRequest<v1::ImportChunk>>* ParsingCallbackService::ImportSessionParsed(
    grpc::CallbackServerContext*, v1::ImportSessionResponse*) {
  return new RejectedReadReactor<ParsedRequest<v1::ImportChunk>>(
      grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "ImportSession is not implemented"));
}

template <class Request, class Response, class Handler>
void ParsingCallbackService::ParseUnary(absl::string_view method, Handler handler) {
  MarkMethodCallback(
      MethodIndex(method, Request::descriptor()),
      new grpc::internal::CallbackUnaryHandler<ParsedRequest<Request>, Response>(
          [this, handler](grpc::CallbackServerContext* ctx, const ParsedRequest<Request>* request,
                          Response* response) -> grpc::ServerUnaryReactor* {
            const absl::StatusOr<Principal> caller = CallerOf(ctx);
            if (!caller.ok()) {
              grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
              reactor->Finish(ToGrpc(caller.status()));
              return reactor;
            }
            if (!request->status.ok()) {
              grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
              reactor->Finish(ToGrpc(request->status));
              return reactor;
            }
            if (absl::Status admitted = Admit(*caller, request->message); !admitted.ok()) {
              grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
              reactor->Finish(ToGrpc(admitted));
              return reactor;
            }
            return handler(ctx, &request->message, response);
          }));
}

template <class Request, class Response, class Handler>
void ParsingCallbackService::ParseServerStreaming(absl::string_view method, Handler handler) {
  MarkMethodCallback(
      MethodIndex(method, Request::descriptor()),
      new grpc::internal::CallbackServerStreamingHandler<ParsedRequest<Request>, Response>(
          [this, handler](grpc::CallbackServerContext* ctx,
                          const ParsedRequest<Request>* request) -> grpc::ServerWriteReactor<Response>* {
            const absl::StatusOr<Principal> caller = CallerOf(ctx);
            if (!caller.ok()) {
              return new RejectedWriteReactor<Response>(ToGrpc(caller.status()));
            }
            if (!request->status.ok()) return new RejectedWriteReactor<Response>(ToGrpc(request->status));
            if (absl::Status admitted = Admit(*caller, request->message); !admitted.ok()) {
              return new RejectedWriteReactor<Response>(ToGrpc(admitted));
            }
            return handler(ctx, &request->message);
          }));
}

absl::StatusOr<Principal> ParsingCallbackService::CallerOf(const grpc::CallbackServerContext* ctx) const {
  return AuthenticateCall(authenticator_, *ctx);
}

absl::Status ParsingCallbackService::Admit(const Principal& caller, const google::protobuf::Message& request) const {
  return access_policy_ == nullptr ? absl::OkStatus() : access_policy_->Check(caller, request);
}

ParsingCallbackService::ParsingCallbackService() {
  // Each handler calls the typed virtual method (the derived class's).
  ParseUnary<v1::CreateSessionRequest, v1::Session>(
      "CreateSession", [this](auto* ctx, auto* req, auto* resp) { return CreateSession(ctx, req, resp); });
  ParseUnary<v1::AppendRequest, v1::AppendResponse>(
      "Append", [this](auto* ctx, auto* req, auto* resp) { return Append(ctx, req, resp); });
  ParseServerStreaming<v1::GenerateRequest, v1::GenerateResponse>(
      "Generate", [this](auto* ctx, auto* req) { return Generate(ctx, req); });
  ParseUnary<v1::ForkRequest, v1::ForkResponse>(
      "Fork", [this](auto* ctx, auto* req, auto* resp) { return Fork(ctx, req, resp); });
  ParseUnary<v1::SnapshotRequest, v1::Checkpoint>(
      "Snapshot", [this](auto* ctx, auto* req, auto* resp) { return Snapshot(ctx, req, resp); });
  ParseUnary<v1::RestoreRequest, v1::Session>(
      "Restore", [this](auto* ctx, auto* req, auto* resp) { return Restore(ctx, req, resp); });
  ParseUnary<v1::GetSessionRequest, v1::Session>(
      "GetSession", [this](auto* ctx, auto* req, auto* resp) { return GetSession(ctx, req, resp); });
  ParseUnary<v1::ListSessionsRequest, v1::ListSessionsResponse>(
      "ListSessions", [this](auto* ctx, auto* req, auto* resp) { return ListSessions(ctx, req, resp); });
  ParseUnary<v1::DeleteSessionRequest, v1::DeleteSessionResponse>(
      "DeleteSession", [this](auto* ctx, auto* req, auto* resp) { return DeleteSession(ctx, req, resp); });
  ParseUnary<v1::ListCheckpointsRequest, v1::ListCheckpointsResponse>(
      "ListCheckpoints",
      [this](auto* ctx, auto* req, auto* resp) { return ListCheckpoints(ctx, req, resp); });
  ParseUnary<v1::DeleteCheckpointRequest, v1::DeleteCheckpointResponse>(
      "DeleteCheckpoint",
      [this](auto* ctx, auto* req, auto* resp) { return DeleteCheckpoint(ctx, req, resp); });
  ParseUnary<v1::GetServerInfoRequest, v1::ServerInfo>(
      "GetServerInfo", [this](auto* ctx, auto* req, auto* resp) { return GetServerInfo(ctx, req, resp); });
  ParseUnary<v1::TruncateRequest, v1::TruncateResponse>(
      "Truncate", [this](auto* ctx, auto* req, auto* resp) { return Truncate(ctx, req, resp); });
  ParseUnary<v1::TokenizeRequest, v1::TokenizeResponse>(
      "Tokenize", [this](auto* ctx, auto* req, auto* resp) { return Tokenize(ctx, req, resp); });
  ParseUnary<v1::DetokenizeRequest, v1::DetokenizeResponse>(
      "Detokenize", [this](auto* ctx, auto* req, auto* resp) { return Detokenize(ctx, req, resp); });
  ParseServerStreaming<v1::ExportSessionRequest, v1::ExportChunk>(
      "ExportSession", [this](auto* ctx, auto* req) { return ExportSession(ctx, req); });
  ParseClientStreaming<v1::ImportChunk, v1::ImportSessionResponse>(
      "ImportSession", [this](auto* ctx, auto* resp) { return ImportSessionParsed(ctx, resp); });
  ParseUnary<v1::FindMissingPagesRequest, v1::FindMissingPagesResponse>(
      "FindMissingPages",
      [this](auto* ctx, auto* req, auto* resp) { return FindMissingPages(ctx, req, resp); });
}

}  // namespace kvs
