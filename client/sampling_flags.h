// The sampling flags shared by `kvsession run`, `generate` and `sample`:
//   --temp T --top-k K --top-p P --min-p M --repeat-penalty R
//   --repeat-last-n N --seed S
// Defaults follow llama.cpp (temp 0.8, top-k 40, top-p 0.95, min-p 0.05,
// no repetition penalty); without --seed a random seed is drawn.
#ifndef KVSESSION_CLIENT_SAMPLING_FLAGS_H_
#define KVSESSION_CLIENT_SAMPLING_FLAGS_H_

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "client/cli_args.h"
#include "kvsession/v1/kvsession.pb.h"
#include "model/sampler.h"

namespace kvs {

// Names of the flags, to declare them with CliArgs::Parse.
const std::set<std::string>& SamplingFlagNames();

// The parameters the flags give, validated.
absl::StatusOr<SamplingParams> ParseSamplingFlags(const CliArgs& args);

// For a server request: sets only the fields whose flags are present (so
// unset ones keep the session's defaults), validating the values.
absl::Status SamplingFlagsToProto(const CliArgs& args, kvsession::v1::SamplingParams* out);

}  // namespace kvs

#endif  // KVSESSION_CLIENT_SAMPLING_FLAGS_H_
