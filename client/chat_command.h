// `kvsession chat`: an interactive conversation, one line at a time.
//
//   kvsession chat [--session S] [--server ADDR] [--system TEXT] [-n N]
//                  [--no-thinking] [sampling flags] [--json]
//   kvsession chat --model M.gguf [--system TEXT] [-n N] [--no-thinking]
//                  [--chat-template NAME] [sampling flags] [--json]
//
// Reads a line from stdin (the user's message), streams the model's reply
// to stdout, and repeats until end of input (empty lines are skipped). With
// a server, each turn is one Generate with the line as a chat message: the
// server renders only the new turn, so each reply costs its own tokens;
// without --session a new chat session is created (its id goes to stderr,
// to continue it later with --session). With --model the same runs in this
// process (model/chat_template.h), nothing persisted. -n bounds each reply
// (default 512). With --json each turn prints one JSON object ({"session",
// "ids", "text", "finish_reason", "usage"}) instead of streaming. "> " is
// printed to stderr before each line when stdin is a terminal.
//
// Returns the exit code: 0 at end of input, 1 when the server or the model
// fails, 2 for usage errors.
#ifndef KVSESSION_CLIENT_CHAT_COMMAND_H_
#define KVSESSION_CLIENT_CHAT_COMMAND_H_

#include <string>
#include <vector>

namespace kvs {

int ChatCommand(const std::vector<std::string>& args);

}  // namespace kvs

#endif  // KVSESSION_CLIENT_CHAT_COMMAND_H_
