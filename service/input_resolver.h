// InputResolver: turns a request's Input (text, token ids or chat
// messages) into the token ids a call adds to a session, and decides the
// chat side of a Generate: whether to add the template's generation prompt
// and how the session's ChatState changes (service/chat_state.h).
//
// Rules (documented for clients in the proto and docs/api.md):
//   - text: tokenized as a prompt when the session holds nothing beyond
//     BOS, otherwise as a continuation; `parse_special` as given.
//   - tokens: passed through (ids are range-checked by Engine::Validate).
//   - messages: rendered with the chat template; content is plain text
//     (control-token text stays text). A session that is not a chat yet
//     gets the conversation's start (a BOS the template writes is not
//     repeated after the session's own BOS); a chat gets only the new
//     turns. An open assistant turn is closed first (end-of-turn marker and
//     the text after it). A turn closed by its end-of-turn token without
//     the text after it (an ERROR session that stopped at its context
//     limit, Engine::CloseChatTurn; or a truncation to that token) gets
//     that text first ("\n" for ChatML). The session becomes a chat with
//     no open turn.
//   - Generate: unless add_generation_prompt is false, a chat session
//     without an open assistant turn gets the generation prompt (true:
//     always, closing an open turn first, or finishing a closed one as
//     messages do), and its turn becomes open.
//
// Errors (nothing changes on error): INVALID_ARGUMENT for oversized input,
// invalid UTF-8, an empty message list, an unknown role;
// FAILED_PRECONDITION for messages or a generation prompt when the model
// has no recognised chat template (naming the supported families); for
// an unknown --chat-template family Create fails instead.
//
// Immutable after creation; thread-safe. Borrows the tokenizer.
#ifndef KVSESSION_SERVICE_INPUT_RESOLVER_H_
#define KVSESSION_SERVICE_INPUT_RESOLVER_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kvsession/v1/kvsession.pb.h"
#include "model/chat_template.h"
#include "model/gguf_file.h"
#include "model/tokenizer.h"
#include "service/chat_state.h"

namespace kvs {

// What a Generate asks of the chat template.
struct GenerationPromptChoice {
  std::optional<bool> add;  // unset: automatic (see above)
  bool enable_thinking = true;
};

// What a call adds to a session.
struct ResolvedInput {
  std::vector<int32_t> ids;
  // Set when the session is or becomes a chat: the state once `ids` are
  // appended, and how the job closes a turn (Engine::Submit).
  std::optional<ChatJob> chat;
};

struct InputLimits {
  int max_context = 0;      // tokens
  int max_input_bytes = 0;  // text, or all message content together
};

class InputResolver {
 public:
  // The model's template (its GGUF's `tokenizer.chat_template`), or the
  // family `chat_template_family` when not empty. InvalidArgument (naming
  // the supported families) for an unknown family name. A model without a
  // recognised template is fine: messages then answer FAILED_PRECONDITION.
  static absl::StatusOr<InputResolver> Create(const GgufFile& gguf, const Tokenizer& tokenizer,
                                              std::string_view chat_template_family,
                                              InputLimits limits);

  // The ids `input` (may be null: no input) adds to a session holding
  // `session_tokens` with chat state `chat`; `generate` is set for a
  // Generate (its prompt choice).
  absl::StatusOr<ResolvedInput> Resolve(const kvsession::v1::Input* input,
                                        std::span<const int32_t> session_tokens,
                                        const ChatState& chat,
                                        const GenerationPromptChoice* generate) const;

  // Text of `ids`: control tokens contribute their text when
  // `include_special` (else nothing); invalid UTF-8 becomes U+FFFD.
  std::string Decode(std::span<const int32_t> ids, bool include_special) const;

  // The template's family name ("qwen3", ...), or "" when there is none.
  std::string_view chat_family() const;

 private:
  InputResolver(const Tokenizer& tokenizer, absl::StatusOr<ChatTemplate> chat, InputLimits limits)
      : tokenizer_(&tokenizer), chat_(std::move(chat)), limits_(limits) {}

  absl::StatusOr<std::vector<int32_t>> ResolveText(const kvsession::v1::Input& input,
                                                   std::span<const int32_t> session_tokens) const;
  // Appends the rendering of `messages` to `ids` and updates `chat`.
  absl::Status AppendMessages(const kvsession::v1::ChatMessages& messages,
                              std::span<const int32_t> session_tokens, std::vector<int32_t>* ids,
                              ChatState* chat) const;
  // What goes before a new turn in a session holding `tokens` with chat
  // state `chat`: the close of an open turn, the text after a bare
  // end-of-turn token that ends `tokens`, or nothing. Needs a template.
  std::vector<int32_t> TurnCloser(std::span<const int32_t> tokens, const ChatState& chat) const;
  // FailedPrecondition naming the supported families, for `what` ("chat
  // messages", ...), when there is no template.
  absl::Status NoTemplate(std::string_view what) const;

  const Tokenizer* tokenizer_;
  absl::StatusOr<ChatTemplate> chat_;
  InputLimits limits_;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_INPUT_RESOLVER_H_
