// CliArgs: the flags of one `kvsession <command>` invocation.
//
// Accepts `--name value`, `--name=value`, `-n value` and boolean `--name`.
// Every flag must be declared by the command; an unknown flag, a missing
// value or a malformed number is an error that names the flag.
#ifndef KVSESSION_CLIENT_CLI_ARGS_H_
#define KVSESSION_CLIENT_CLI_ARGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kvs {

class CliArgs {
 public:
  // `value_flags` take a value, `bool_flags` do not; names without dashes
  // ("model", "n", "json").
  static absl::StatusOr<CliArgs> Parse(const std::vector<std::string>& args,
                                       const std::set<std::string>& value_flags,
                                       const std::set<std::string>& bool_flags);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> Get(const std::string& name) const;
  std::string GetOr(const std::string& name, const std::string& fallback) const;
  // An integer flag: INVALID_ARGUMENT naming the flag unless it is a whole
  // number that fits a 32-bit int (every integer field it fills is one).
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t fallback) const;
  absl::StatusOr<double> GetDouble(const std::string& name, double fallback) const;
  absl::StatusOr<uint64_t> GetUint64(const std::string& name, uint64_t fallback) const;

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace kvs

#endif  // KVSESSION_CLIENT_CLI_ARGS_H_
