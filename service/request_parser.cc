#include "service/request_parser.h"

#include <optional>
#include <string>

#include <grpcpp/support/proto_buffer_reader.h>

#include "absl/strings/str_cat.h"
#include "proto/utf8_field_finder.h"

namespace kvs {

namespace {

absl::Status Parse(grpc::ByteBuffer* bytes, google::protobuf::Message* message) {
  const google::protobuf::Descriptor& type = *message->GetDescriptor();
  if (bytes == nullptr || !bytes->Valid()) {
    return absl::InvalidArgumentError(absl::StrCat("the call carried no ", type.full_name(), " message"));
  }
  // The walk comes first: protobuf's parser would reject the same string
  // field, but without saying which (and logging each time).
  {
    grpc::ProtoBufferReader reader(bytes);
    if (!reader.status().ok()) {
      return absl::InvalidArgumentError(absl::StrCat("the request is not a valid ", type.full_name(), " message"));
    }
    const StringFieldWalk walk = WalkStringFields(type, &reader);
    if (walk.invalid_utf8) return absl::InvalidArgumentError(absl::StrCat(type.name(), ".", *walk.invalid_utf8));
    // Malformed bytes are refused here: protobuf's parser would refuse them
    // too, after checking (and logging) a string cut short by the end.
    if (walk.malformed) {
      return absl::InvalidArgumentError(absl::StrCat("the request is not a valid ", type.full_name(), " message"));
    }
  }
  grpc::ProtoBufferReader reader(bytes);
  if (!reader.status().ok() || !message->ParseFromZeroCopyStream(&reader)) {
    message->Clear();
    return absl::InvalidArgumentError(absl::StrCat("the request is not a valid ", type.full_name(), " message"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseRequest(grpc::ByteBuffer* bytes, google::protobuf::Message* message) {
  message->Clear();
  absl::Status status = Parse(bytes, message);
  // gRPC's handlers Release() the buffer after deserializing: freeing the
  // request's bytes is the deserializer's job (found by the fuzzer: every
  // request leaked otherwise).
  if (bytes != nullptr) bytes->Clear();
  return status;
}

}  // namespace kvs
