#include "service/proto_convert.h"

#include <algorithm>

namespace kvs {
namespace v1 = kvsession::v1;

namespace {

void ToTimestamp(int64_t us, google::protobuf::Timestamp* t) {
  t->set_seconds(us / 1000000);
  t->set_nanos(static_cast<int32_t>(us % 1000000) * 1000);
}

}  // namespace

SamplingParams MergeSampling(const SamplingParams& base, const v1::SamplingParams& p) {
  SamplingParams out = base;
  if (p.has_temperature()) out.temperature = p.temperature();
  if (p.has_top_k()) out.top_k = p.top_k();
  if (p.has_top_p()) out.top_p = p.top_p();
  if (p.has_min_p()) out.min_p = p.min_p();
  if (p.has_repetition_penalty()) out.repetition_penalty = p.repetition_penalty();
  if (p.has_repetition_last_n()) out.repetition_last_n = p.repetition_last_n();
  if (p.has_seed()) out.seed = p.seed();
  if (!p.logit_bias().empty()) {
    out.logit_bias.assign(p.logit_bias().begin(), p.logit_bias().end());
    std::sort(out.logit_bias.begin(), out.logit_bias.end());
  }
  return out;
}

void ToProto(const SamplingParams& p, v1::SamplingParams* out) {
  out->set_temperature(p.temperature);
  out->set_top_k(p.top_k);
  out->set_top_p(p.top_p);
  out->set_min_p(p.min_p);
  out->set_repetition_penalty(p.repetition_penalty);
  out->set_repetition_last_n(p.repetition_last_n);
  out->set_seed(p.seed);
  for (const auto& [id, bias] : p.logit_bias) (*out->mutable_logit_bias())[id] = bias;
}

void ToProto(const SessionInfo& info, v1::Session* out) {
  out->set_id(info.id);
  out->set_length(info.length);
  ToProto(info.sampling, out->mutable_sampling());
  for (const auto& [k, v] : info.labels) (*out->mutable_labels())[k] = v;
  ToTimestamp(info.create_time_us, out->mutable_create_time());
  ToTimestamp(info.update_time_us, out->mutable_update_time());
  ToTimestamp(info.last_used_us, out->mutable_last_use_time());
  out->set_state(info.busy ? v1::SESSION_STATE_BUSY : v1::SESSION_STATE_IDLE);
  out->set_resident(info.resident);
  out->set_parent_session_id(info.parent_session_id);
  out->set_chat(info.chat.started);
  out->set_assistant_turn_open(info.chat.turn_open);
  out->set_checkpoint_id(info.checkpoint_id);
  out->set_kv_pages(info.kv_pages);
  out->set_kv_pages_shared(info.kv_pages_shared);
  out->set_context_policy(ToProto(info.context_policy));
  out->set_keep_tokens(info.keep_tokens);
}

v1::ContextPolicy ToProto(ContextPolicy p) {
  return p == ContextPolicy::kSlide ? v1::CONTEXT_POLICY_SLIDE : v1::CONTEXT_POLICY_ERROR;
}

ContextPolicy FromProto(v1::ContextPolicy p) {
  return p == v1::CONTEXT_POLICY_SLIDE ? ContextPolicy::kSlide : ContextPolicy::kError;
}

void ToProto(const CheckpointRecord& c, v1::Checkpoint* out) {
  out->set_id(c.id());
  out->set_session_id(c.session().id());
  out->set_name(c.name());
  out->set_length(c.session().tokens_size());
  ToTimestamp(c.create_time_us(), out->mutable_create_time());
  out->set_kv_pages(c.session().page_hashes_size());
}

void ToProto(const JobUsage& u, v1::Usage* out) {
  out->set_prompt_tokens(u.prompt_tokens);
  out->set_cached_tokens(u.cached_tokens);
  out->set_generated_tokens(u.generated_tokens);
  out->set_session_tokens(u.session_tokens);
  out->set_tokens_dropped(u.tokens_dropped);
}

v1::FinishReason ToProto(FinishReason r) {
  switch (r) {
    case FinishReason::kStopToken: return v1::FINISH_REASON_STOP_TOKEN;
    case FinishReason::kStopSequence: return v1::FINISH_REASON_STOP_SEQUENCE;
    case FinishReason::kLength: return v1::FINISH_REASON_LENGTH;
    case FinishReason::kCancelled: return v1::FINISH_REASON_CANCELLED;
    case FinishReason::kError: return v1::FINISH_REASON_ERROR;
    case FinishReason::kNone: break;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

std::map<std::string, std::string> Labels(const google::protobuf::Map<std::string, std::string>& m) {
  return std::map<std::string, std::string>(m.begin(), m.end());
}

}  // namespace kvs
