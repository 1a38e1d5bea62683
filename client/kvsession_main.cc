// kvsession: the command-line client. Local commands run a model in this
// process; the others talk to a kvsessiond server over gRPC.
#include <algorithm>
#include <cstddef>
#include <iostream>
#include <string>
#include <vector>

#include "client/chat_command.h"
#include "client/cli_connection.h"
#include "client/migrate_command.h"
#include "client/local_commands.h"
#include "client/remote_commands.h"

namespace {

constexpr char kUsage[] = R"(usage: kvsession <command> [flags]

Local (no server):
  run       --model M.gguf --prompt TEXT -n N [--temp T --top-k K --top-p P --min-p M
            --repeat-penalty R --repeat-last-n N --seed S --kv-type f16|bf16|q8_0|f32 --threads N
            --matmul fast|exact]
            [--parse-special] [--json]
  tokenize  --model M.gguf --text TEXT [--no-bos] [--parse-special] [--json]
  render    --model M.gguf --messages FILE.json [--no-generation-prompt] [--no-thinking]
            [--chat-template NAME] [--json]

Remote (a kvsessiond server; --server ADDR, default 127.0.0.1:50051; --json for JSON;
        TLS: --tls-ca CA.pem (or --tls for the system's CAs), mutual TLS: --tls-cert C.pem
        --tls-key K.pem; API key: --api-key KEY or $KVSESSION_API_KEY; an admin key acting
        for tenant T: --as-tenant T; these and --json may also come before the command):
  create    [--text T] [sampling flags] [--context error|slide] [--keep-tokens N]
  append    --session S --text T
  generate  --session S [--prompt T] -n N [sampling flags] [--stop STR] [--logprobs K]
            [--ignore-eos] [--timeout-ms MS] [--context error|slide]
  fork      --session S --count K [--seeds A,B,...] [--at-length N]
  sample    --session S --count K -n N [sampling flags] [--at-length N]
  snapshot  --session S [--name NAME]
  restore   --checkpoint C | --session S
  truncate  --session S --length N      (keep the first N tokens; BOS counts)
  ls
  show      --session S [--ids] [--with-text]
  rm        --session S
  info
  migrate   --session S --from A --to B [--with-checkpoints] [--keep-source] [--timeout-ms MS]
            (moves a session to another server; pages B holds are not sent)
  chat      [--session S] [--system TEXT] [-n N] [--no-thinking] [sampling flags]
            reads a line, streams the reply, repeats (a new chat session without --session)

Chat without a server:
  chat      --model M.gguf [--system TEXT] [-n N] [--no-thinking] [--chat-template NAME]
            [sampling flags]
)";

// `kvsession --server A ls` reads as `kvsession ls --server A`: the
// connection flags (cli_connection.h) and --json may come before the
// command, as git's and kubectl's global flags do. Moves them to just
// after it in `words` (the arguments after the program name), so the
// command's own flags follow them: a later flag wins, and a flag of the
// command missing its value at the end is still an error rather than
// taking a moved flag as its value. False after printing an error for any
// other flag there, or a value flag without its value.
bool MoveLeadingFlagsAfterTheCommand(std::vector<std::string>* words) {
  std::vector<std::string> leading;
  size_t i = 0;
  while (i < words->size() && (*words)[i].starts_with("--") && (*words)[i] != "--help") {
    const std::string& word = (*words)[i];
    const size_t eq = word.find('=');
    const std::string name = word.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const bool takes_value = kvs::ConnectionValueFlags().contains(name);
    if (!takes_value && !kvs::ConnectionBoolFlags().contains(name) && name != "json") {
      std::cerr << "kvsession: only the connection flags and --json may come before the command; give "
                << word.substr(0, std::min(eq, size_t{64})) << " after it (kvsession <command> [flags])\n";
      return false;
    }
    leading.push_back(word);
    if (takes_value && eq == std::string::npos) {
      if (i + 1 >= words->size()) {
        std::cerr << "kvsession: --" << name << " needs a value\n";
        return false;
      }
      leading.push_back((*words)[++i]);
    }
    ++i;
  }
  words->erase(words->begin(), words->begin() + static_cast<std::ptrdiff_t>(i));
  if (!words->empty()) words->insert(words->begin() + 1, leading.begin(), leading.end());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> words(argv + 1, argv + argc);
  if (!MoveLeadingFlagsAfterTheCommand(&words)) return 2;
  if (words.empty() || words[0].starts_with("--")) {
    // No command (only connection flags), or --help.
    std::cout << kUsage;
    return words.empty() || words[0] != "--help" ? 2 : 0;
  }
  if (words[0] == "help") {
    std::cout << kUsage;
    return 0;
  }
  const std::string command = words[0];
  const std::vector<std::string> args(words.begin() + 1, words.end());
  if (command == "run") return kvs::RunCommand(args);
  if (command == "tokenize") return kvs::TokenizeCommand(args);
  if (command == "render") return kvs::RenderCommand(args);
  if (command == "chat") return kvs::ChatCommand(args);
  if (command == "migrate") return kvs::MigrateCommand(args);
  if (int rc = kvs::RunRemoteCommand(command, args); rc >= 0) return rc;
  std::cerr << "kvsession: unknown command '" << command << "'\n" << kUsage;
  return 2;
}
