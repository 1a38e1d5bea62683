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
// Thread safety: as CallbackService (handlers run on gRPC threads).
#ifndef KVSESSION_SERVICE_PARSING_CALLBACK_SERVICE_H_
#define KVSESSION_SERVICE_PARSING_CALLBACK_SERVICE_H_

#include "absl/strings/string_view.h"
#include "kvsession/v1/kvsession.grpc.pb.h"

namespace kvs {

class ParsingCallbackService : public kvsession::v1::KvSession::CallbackService {
 protected:
  ParsingCallbackService();

 private:
  // Registers unary `method` (its typed handler `handler(ctx, request,
  // response)`) / server-streaming `method` (`handler(ctx, request)`).
  template <class Request, class Response, class Handler>
  void ParseUnary(absl::string_view method, Handler handler);
  template <class Request, class Response, class Handler>
  void ParseServerStreaming(absl::string_view method, Handler handler);
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_PARSING_CALLBACK_SERVICE_H_
