// ParsingCallbackService: kvsession.v1.KvSession::CallbackService whose
// methods parse their requests themselves (service/request_parser.h), so
// a request that is not a valid message (invalid UTF-8 in a string field,
// malformed bytes, no message at all) gets INVALID_ARGUMENT naming the
// request type and the field, instead of gRPC's UNIMPLEMENTED with an empty
// message. Handlers stay typed: the class deriving from this one overrides
// the generated typed methods (CreateSession(ctx, const
// CreateSessionRequest*, Session*), ...) as with CallbackService, and they
// only ever see requests that parsed. Responses are serialized by gRPC as
// before; the public .proto is unchanged.
//
// How: the constructor re-registers every method with gRPC's callback
// handler for ParsedRequest<Request> (whose deserialization never fails and
// keeps the parse status), answering a failed parse itself and calling the
// typed method otherwise. The request lives in gRPC's call arena until the
// call is done, as before. A method added to the .proto keeps gRPC's
// default parsing until it is listed in the constructor
// (tests/hostile_request_test.cc sends garbage to every method of the
// service descriptor and fails until it is). Do not use the generated
// SetMessageAllocatorFor_*: the handlers are no longer the generated ones.
//
// Authentication: with an Authenticator set (SetAuthenticator, before the
// server starts), every method first authenticates the call's
// `authorization: Bearer KEY` header (service/auth/call_auth.h); a call
// that fails gets UNAUTHENTICATED before its request is looked at or any
// handler runs. Handlers get the caller with CallerOf(ctx). With an
// AccessPolicy set (SetAccessPolicy), a parsed request then goes to it, and
// the call ends with its status unless OK (service/auth/access_policy.h).
//
// Thread safety: as CallbackService (handlers run on gRPC threads).
#ifndef KVSESSION_SERVICE_PARSING_CALLBACK_SERVICE_H_
#define KVSESSION_SERVICE_PARSING_CALLBACK_SERVICE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kvsession/v1/kvsession.grpc.pb.h"
#include "service/auth/access_policy.h"
#include "service/auth/authenticator.h"
#include "service/auth/principal.h"
#include "service/request_parser.h"

namespace kvs {

class ParsingCallbackService : public kvsession::v1::KvSession::CallbackService {
 public:
  // Borrowed; must outlive the server. nullptr (the default): no
  // authentication, every caller is the default tenant. Call before the
  // server starts.
  void SetAuthenticator(const Authenticator* authenticator) { authenticator_ = authenticator; }
  // Borrowed; must outlive the server. nullptr (the default): every
  // authenticated caller may make any request. Call before the server
  // starts.
  void SetAccessPolicy(const AccessPolicy* policy) { access_policy_ = policy; }

 protected:
  ParsingCallbackService();

  // ImportSession (client streaming) reads ParsedRequest<ImportChunk>, so
  // its handler is this one rather than the generated ImportSession. The
  // default answers UNIMPLEMENTED.
  virtual grpc::ServerReadReactor<ParsedRequest<kvsession::v1::ImportChunk>>* ImportSessionParsed(
      grpc::CallbackServerContext* ctx, kvsession::v1::ImportSessionResponse* response);
  // Whether calls are authenticated (SetAuthenticator was given one).
  bool authenticating() const { return authenticator_ != nullptr; }

  // The caller of a call that reached a handler (it authenticated);
  // UNAUTHENTICATED only if its key was removed by a reload meanwhile.
  absl::StatusOr<Principal> CallerOf(const grpc::CallbackServerContext* ctx) const;

 private:
  // Registers unary `method` (its typed handler `handler(ctx, request,
  // response)`) / server-streaming `method` (`handler(ctx, request)`).
  template <class Request, class Response, class Handler>
  void ParseUnary(absl::string_view method, Handler handler);
  template <class Request, class Response, class Handler>
  void ParseServerStreaming(absl::string_view method, Handler handler);
  // Client-streaming `method`: `handler(ctx, response)` returns a reactor
  // reading ParsedRequest<Request> (it answers a chunk that did not parse;
  // the access policy is its business too: it sees the requests one by one).
  template <class Request, class Response, class Handler>
  void ParseClientStreaming(absl::string_view method, Handler handler);

  // Whether the access policy lets `caller` make `request` (OK without one).
  absl::Status Admit(const Principal& caller, const google::protobuf::Message& request) const;

  const Authenticator* authenticator_ = nullptr;
  const AccessPolicy* access_policy_ = nullptr;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_PARSING_CALLBACK_SERVICE_H_
