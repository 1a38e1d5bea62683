// The `kvsession` commands that run a model in-process (no server):
//
//   kvsession run --model M.gguf --prompt "..." -n N [sampling flags]
//                 [--kv-type f16|bf16|q8_0|f32] [--matmul fast|exact] [--threads N]
//                 [--parse-special] [--json]
//   kvsession tokenize --model M.gguf --text "..." [--no-bos] [--parse-special] [--json]
//   kvsession render --model M.gguf --messages FILE.json [--no-generation-prompt]
//                    [--no-thinking] [--chat-template NAME] [--json]
//
// `run` streams the generated text to stdout (or prints one JSON object with
// --json); a progress line about the model load goes to stderr. `tokenize`
// needs only the vocabulary, so it works on vocabulary-only GGUF files.
// `render` formats a conversation (FILE.json: a JSON array of {"role",
// "content"}) with the model's chat template (model/chat_template.h) and
// prints the text and the token ids ({"text", "ids", "chat_template"} with
// --json); it too needs only the vocabulary and the template.
// Each returns the process exit code (0 ok, 1 runtime error, 2 usage).
#ifndef KVSESSION_CLIENT_LOCAL_COMMANDS_H_
#define KVSESSION_CLIENT_LOCAL_COMMANDS_H_

#include <string>
#include <vector>

namespace kvs {

int RunCommand(const std::vector<std::string>& args);
int TokenizeCommand(const std::vector<std::string>& args);
int RenderCommand(const std::vector<std::string>& args);

}  // namespace kvs

#endif  // KVSESSION_CLIENT_LOCAL_COMMANDS_H_
