// The `kvsession` commands that talk to a kvsessiond server
// (--server ADDR, default 127.0.0.1:50051):
//
//   create   [--text T] [sampling flags]          -> {"session": ID, ...}
//   append   --session S --text T
//   generate --session S [--prompt T] -n N [sampling flags] [--stop STR]
//            [--logprobs K] [--timeout-ms MS]     (streams text as it arrives)
//   fork     --session S --count K [--seeds a,b,...] [--at-length N]
//   sample   --session S --count K -n N [sampling flags] [--at-length N]
//            (fork, then generate on every branch concurrently)
//   snapshot --session S [--name NAME]
//   restore  --checkpoint C | --session S
//   truncate --session S --length N              (keep the first N tokens)
//   ls | show --session S [--ids] [--with-text] | rm --session S | info
//
// Human-readable output by default; --json prints one JSON object per
// command (`sample`: a list, one object per branch). Exit codes: 0 ok, 1 the
// server answered an error (printed as "CODE: message"), 2 usage.
#ifndef KVSESSION_CLIENT_REMOTE_COMMANDS_H_
#define KVSESSION_CLIENT_REMOTE_COMMANDS_H_

#include <string>
#include <vector>

namespace kvs {

// Runs `command` (one of the above) with its flags; returns the exit code,
// or -1 when `command` is not a remote command.
int RunRemoteCommand(const std::string& command, const std::vector<std::string>& args);

}  // namespace kvs

#endif  // KVSESSION_CLIENT_REMOTE_COMMANDS_H_
