// ChatTemplate: renders chat messages as a model's template does, to text
// and to token ids, whole or one turn at a time.
//
// The format comes from the GGUF's `tokenizer.chat_template` (recognised by
// family, model/chat_template_family.h) or from an explicit family name.
// Token ids are built so that message content can never forge control
// tokens: the template's own markers (e.g. "<|im_start|>") become their
// token ids directly, and the text between two markers (template text and
// content together, as Hugging Face tokenizes the text between added
// tokens) is tokenized WITHOUT parsing special tokens. A user typing
// "<|im_end|>" gets the tokens of that text. (User-defined tokens such as
// Qwen3's "<think>" are matched in text, as in Hugging Face's tokenizer.)
// No BOS is ever added by the tokenizer: families whose template writes the
// BOS (llama3, gemma, ...) have it as a marker, once.
//
// Incremental use by a session: RenderConversation() for a new session;
// RenderAppended() for messages added to a conversation the session already
// holds; RenderGenerationPrompt() before generating; after the model stops
// on one of end_of_turn_ids(), RenderAfterEndOfTurn() closes its turn.
//
// Ownership: keeps a pointer to the Tokenizer, which must outlive it.
// Immutable after creation; safe to use from several threads.
#ifndef KVSESSION_MODEL_CHAT_TEMPLATE_H_
#define KVSESSION_MODEL_CHAT_TEMPLATE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/chat_template_family.h"
#include "model/gguf_file.h"
#include "model/tokenizer.h"

namespace kvs {

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  // Qwen3 only: false adds an empty "<think>\n\n</think>\n\n" after the
  // generation prompt (the template's enable_thinking=false).
  bool enable_thinking = true;
};

// Rendered text and its token ids (ids.size() may differ from the number
// of pieces; Decode(ids) gives `text` minus control tokens).
struct RenderedChat {
  std::string text;
  std::vector<int32_t> ids;
};

class ChatTemplate {
 public:
  // The template of `gguf` (its `tokenizer.chat_template`), or the family
  // `family_name` when it is not empty. FailedPrecondition (listing the
  // supported families) when the GGUF has no template or an unrecognised
  // one; InvalidArgument for an unknown `family_name`.
  static absl::StatusOr<ChatTemplate> Create(const GgufFile& gguf, const Tokenizer& tokenizer,
                                             std::string_view family_name = {});

  // A template of a known format (never fails).
  static ChatTemplate ForFormat(ChatFormat format, const Tokenizer& tokenizer);

  const ChatFormat& format() const { return format_; }

  // A whole conversation from its start, with the generation prompt if
  // asked. Qwen3 drops the reasoning of assistant turns before the last
  // user message here (only here). InvalidArgument for a bad role, content
  // that is not UTF-8, or a system message the family cannot place.
  absl::StatusOr<RenderedChat> RenderConversation(std::span<const ChatMessage> messages,
                                                  const ChatRenderOptions& options) const;

  // What rendered ids follow in the session, which decides how the first
  // text tokenizes (as llama.cpp and the whole rendering do): at the start
  // or after a special token (a marker, BOS, EOS) it takes SentencePiece's
  // leading space; after ordinary text it does not; after a special token
  // that swallows the whitespace after it (Phi-3's markers) that
  // whitespace gets no tokens. FollowsOf: of a session holding `tokens`.
  enum class Follows { kSpecialTokenOrStart, kText, kWhitespaceSwallowingToken };
  static Follows FollowsOf(std::span<const int32_t> tokens, const Tokenizer& tokenizer);

  // `messages` appended to a conversation. `conversation_has_start`: the
  // session already holds the conversation's start (BOS, default system
  // prompt); with false this renders it first. `follows`: what the session
  // ends with. Assistant messages are rendered as given, except that Qwen3
  // drops the reasoning of those before a later user message of the same
  // call, as the whole conversation does. No generation prompt. Errors as
  // RenderConversation.
  absl::StatusOr<RenderedChat> RenderAppended(std::span<const ChatMessage> messages,
                                              bool conversation_has_start, Follows follows) const;

  // The assistant turn's prefix (empty for llama2/mistral), after what
  // `follows`.
  RenderedChat RenderGenerationPrompt(const ChatRenderOptions& options, Follows follows) const;

  // What follows an end-of-turn token the model generated itself ("\n" for
  // ChatML), so the next appended turn starts where the template expects.
  RenderedChat RenderAfterEndOfTurn() const;

  // What closes an assistant turn the model left open (cut by max_tokens,
  // a stop string or cancellation): the family's first end-of-turn marker
  // and the text after it ("<|im_end|>\n" for ChatML).
  RenderedChat RenderEndOfTurn() const;

  // Token ids that end an assistant turn (e.g. <|im_end|>, <|eot_id|>), for
  // stopping generation; those of the vocabulary only, sorted.
  const std::vector<int32_t>& end_of_turn_ids() const { return end_of_turn_ids_; }

  // Token ids that open a turn (ChatTurnStartMarkers: <|im_start|>,
  // <|start_header_id|>, ...), where a chat session's slide may cut; those
  // of the vocabulary only (empty when it has none), sorted.
  const std::vector<int32_t>& turn_start_ids() const { return turn_start_ids_; }
  // Tokens of the conversation's start that are a whole turn of their own
  // (ChatML's default system prompt), which a slide keeps; 0 for the other
  // families (their BOS comes before the first turn start anyway).
  int conversation_start_tokens() const { return conversation_start_tokens_; }

 private:
  ChatTemplate(ChatFormat format, const Tokenizer& tokenizer);

  // The token of a marker, or -1 when the vocabulary has no token with
  // exactly that text (the marker is then plain text).
  int32_t MarkerToken(std::string_view marker) const;

  // Joins `pieces` into text and ids, after what `follows` (affects
  // SentencePiece's leading space only).
  RenderedChat Tokenize(const std::vector<ChatPiece>& pieces, Follows follows) const;

  ChatFormat format_;
  const Tokenizer* tokenizer_;
  std::vector<int32_t> end_of_turn_ids_;
  std::vector<int32_t> turn_start_ids_;
  int conversation_start_tokens_ = 0;
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_CHAT_TEMPLATE_H_
