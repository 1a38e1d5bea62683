#include "client/cli_args.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

#include "absl/strings/str_cat.h"

namespace kvs {

absl::StatusOr<CliArgs> CliArgs::Parse(const std::vector<std::string>& args,
                                       const std::set<std::string>& value_flags,
                                       const std::set<std::string>& bool_flags) {
  CliArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string name, value;
    bool has_value = false;
    if (a.rfind("--", 0) == 0) {
      name = a.substr(2);
    } else if (a.size() >= 2 && a[0] == '-') {
      name = a.substr(1);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", a, "'"));
    }
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (bool_flags.count(name)) {
      if (has_value) return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      out.values_[name] = "true";
    } else if (value_flags.count(name)) {
      if (!has_value) {
        if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
        value = args[++i];
      }
      out.values_[name] = value;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag '", a, "'"));
    }
  }
  return out;
}

std::optional<std::string> CliArgs::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string CliArgs::GetOr(const std::string& name, const std::string& fallback) const {
  return Get(name).value_or(fallback);
}

absl::StatusOr<int64_t> CliArgs::GetInt(const std::string& name, int64_t fallback) const {
  auto v = Get(name);
  if (!v) return fallback;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno != 0 || x < std::numeric_limits<int32_t>::min() ||
      x > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " expects an integer in [-2^31, 2^31), got '", *v, "'"));
  }
  return x;
}

absl::StatusOr<uint64_t> CliArgs::GetUint64(const std::string& name, uint64_t fallback) const {
  auto v = Get(name);
  if (!v) return fallback;
  errno = 0;
  char* end = nullptr;
  unsigned long long x = std::strtoull(v->c_str(), &end, 10);
  if (v->empty() || (*v)[0] == '-' || *end != '\0' || errno != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " expects a non-negative integer, got '", *v, "'"));
  }
  return x;
}

absl::StatusOr<double> CliArgs::GetDouble(const std::string& name, double fallback) const {
  auto v = Get(name);
  if (!v) return fallback;
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || errno != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " expects a number, got '", *v, "'"));
  }
  return x;
}

}  // namespace kvs
