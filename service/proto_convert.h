// Conversions between the public API messages (kvsession.v1) and the
// service's own types. Pure functions.
#ifndef KVSESSION_SERVICE_PROTO_CONVERT_H_
#define KVSESSION_SERVICE_PROTO_CONVERT_H_

#include <map>
#include <string>

#include "kvsession/v1/kvsession.pb.h"
#include "model/sampler.h"
#include "service/engine.h"
#include "service/session_manager.h"

namespace kvs {

// `base` with every field the message sets replacing it.
SamplingParams MergeSampling(const SamplingParams& base, const kvsession::v1::SamplingParams& p);
void ToProto(const SamplingParams& p, kvsession::v1::SamplingParams* out);
void ToProto(const SessionInfo& info, kvsession::v1::Session* out);
void ToProto(const CheckpointRecord& c, kvsession::v1::Checkpoint* out);
void ToProto(const JobUsage& u, kvsession::v1::Usage* out);
kvsession::v1::FinishReason ToProto(FinishReason r);
kvsession::v1::ContextPolicy ToProto(ContextPolicy p);
// UNSPECIFIED (and any unknown value) is ERROR.
ContextPolicy FromProto(kvsession::v1::ContextPolicy p);

std::map<std::string, std::string> Labels(const google::protobuf::Map<std::string, std::string>& m);

}  // namespace kvs

#endif  // KVSESSION_SERVICE_PROTO_CONVERT_H_
