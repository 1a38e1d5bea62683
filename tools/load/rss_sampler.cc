#include "tools/load/rss_sampler.h"

#include <fstream>
#include <sstream>
#include <string>


namespace kvs::load {

std::optional<int64_t> ParseVmRssKiB(std::string_view status_text) {
  std::istringstream lines{std::string(status_text)};
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    int64_t kib = 0;
    std::string unit;
    if (!(fields >> kib >> unit) || unit != "kB") return std::nullopt;
    return kib;
  }
  return std::nullopt;
}

std::optional<int64_t> ReadVmRssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return ParseVmRssKiB(text.str());
}

}  // namespace kvs::load
