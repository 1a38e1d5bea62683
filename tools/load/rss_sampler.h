// Resident memory of a process: VmRSS from /proc/<pid>/status (Linux).
// Stateless; thread-safe.
#ifndef KVSESSION_TOOLS_LOAD_RSS_SAMPLER_H_
#define KVSESSION_TOOLS_LOAD_RSS_SAMPLER_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace kvs::load {

// VmRSS in KiB of the text of a /proc/<pid>/status file; nullopt if absent.
std::optional<int64_t> ParseVmRssKiB(std::string_view status_text);

// VmRSS in KiB of process `pid`; nullopt if it is gone.
std::optional<int64_t> ReadVmRssKiB(pid_t pid);

}  // namespace kvs::load

#endif  // KVSESSION_TOOLS_LOAD_RSS_SAMPLER_H_
