#include "client/sampling_flags.h"

#include <random>

namespace kvs {

const std::set<std::string>& SamplingFlagNames() {
  static const std::set<std::string> names = {"temp",           "top-k",          "top-p", "min-p",
                                              "repeat-penalty", "repeat-last-n", "seed"};
  return names;
}

absl::StatusOr<SamplingParams> ParseSamplingFlags(const CliArgs& args) {
  SamplingParams p;
  auto temp = args.GetDouble("temp", p.temperature);
  auto top_k = args.GetInt("top-k", p.top_k);
  auto top_p = args.GetDouble("top-p", p.top_p);
  auto min_p = args.GetDouble("min-p", p.min_p);
  auto penalty = args.GetDouble("repeat-penalty", p.repetition_penalty);
  auto last_n = args.GetInt("repeat-last-n", p.repetition_last_n);
  auto seed = args.GetUint64("seed", std::random_device{}());
  for (const absl::Status& s : {temp.status(), top_k.status(), top_p.status(), min_p.status(),
                                penalty.status(), last_n.status(), seed.status()}) {
    if (!s.ok()) return s;
  }
  p.temperature = static_cast<float>(*temp);
  p.top_k = static_cast<int>(*top_k);
  p.top_p = static_cast<float>(*top_p);
  p.min_p = static_cast<float>(*min_p);
  p.repetition_penalty = static_cast<float>(*penalty);
  p.repetition_last_n = static_cast<int>(*last_n);
  p.seed = *seed;
  if (absl::Status s = p.Validate(); !s.ok()) return s;
  return p;
}

absl::Status SamplingFlagsToProto(const CliArgs& args, kvsession::v1::SamplingParams* out) {
  absl::StatusOr<SamplingParams> p = ParseSamplingFlags(args);
  if (!p.ok()) return p.status();
  if (args.Has("temp")) out->set_temperature(p->temperature);
  if (args.Has("top-k")) out->set_top_k(p->top_k);
  if (args.Has("top-p")) out->set_top_p(p->top_p);
  if (args.Has("min-p")) out->set_min_p(p->min_p);
  if (args.Has("repeat-penalty")) out->set_repetition_penalty(p->repetition_penalty);
  if (args.Has("repeat-last-n")) out->set_repetition_last_n(p->repetition_last_n);
  if (args.Has("seed")) out->set_seed(p->seed);
  return absl::OkStatus();
}

}  // namespace kvs
