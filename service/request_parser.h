// How a request's bytes become a message, in one place for every method
// of the service: a request that does not parse gets INVALID_ARGUMENT with
// a message saying why, instead of gRPC's UNIMPLEMENTED with no message.
//
//   "CreateSessionRequest.labels: a key is not valid UTF-8"
//   "GenerateRequest.stop[1] is not valid UTF-8"
//   "the request is not a valid kvsession.v1.ForkRequest message"
//
// Messages name the request type and, for invalid UTF-8 in a string field
// (proto/utf8_field_finder.h), the field; they never echo request bytes.
//
// ParsedRequest<M> is the request type the service's handlers are
// registered with (service/parsing_callback_service.h): gRPC deserializes
// into it through the SerializationTraits below, which always succeed and
// leave the parse's status in it, so the handler can answer it.
//
// Pure functions; thread-safe.
#ifndef KVSESSION_SERVICE_REQUEST_PARSER_H_
#define KVSESSION_SERVICE_REQUEST_PARSER_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>
#include <google/protobuf/message.h>

#include "absl/status/status.h"

namespace kvs {

// Parses `bytes` into `message` (cleared first). OK, or INVALID_ARGUMENT as
// above; on error `message` holds no part of the request (it is cleared).
// A null or invalid buffer (a call without a request message) is
// INVALID_ARGUMENT too. Consumes `bytes`: it is cleared (its bytes freed)
// whatever the outcome, as gRPC expects of a deserializer.
absl::Status ParseRequest(grpc::ByteBuffer* bytes, google::protobuf::Message* message);

// A request message with the status of its parse.
template <class M>
struct ParsedRequest {
  M message;
  absl::Status status;
};

}  // namespace kvs

namespace grpc {

// Deserialization for ParsedRequest<M>: never fails (a failed parse would
// make gRPC answer UNIMPLEMENTED with an empty message); the parse's status
// goes into the ParsedRequest for the handler to answer.
template <class M>
class SerializationTraits<kvs::ParsedRequest<M>, void> {
 public:
  static Status Deserialize(ByteBuffer* bytes, kvs::ParsedRequest<M>* request) {
    request->status = kvs::ParseRequest(bytes, &request->message);
    return Status::OK;
  }
};

}  // namespace grpc

#endif  // KVSESSION_SERVICE_REQUEST_PARSER_H_
