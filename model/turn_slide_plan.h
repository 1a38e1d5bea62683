// The slide of a chat session (SLIDE, model/kv_slide.h) by whole turns:
// the dropped tokens begin and end where a turn of the chat template
// begins (its turn-opening marker token, ChatTemplate::turn_start_ids), so
// what stays is the conversation's start plus whole turns, never a
// template's markup cut in two.
//
//   before: [ head | turn a | turn b | ... | turn k | turn k+1 ... ]
//   after:  [ head | turn k+1 ... ]            (a..k dropped)
//
// The kept head ends at the first turn start at or after keep_tokens (with
// keep_tokens 0: the first turn start, i.e. the conversation's start, such
// as Llama 3's <|begin_of_text|>; nothing for Qwen3, whose start is empty).
// The dropped range then ends at the first turn start at least
// (max_context - head) / 2 tokens later (about the half of the context the
// page rule drops), or, when the turns after that are one long turn, at the
// last turn start after the head that is still in the KV (fewer tokens, but
// room for at least one). Turn boundaries are generally not page aligned:
// the slide is applied with SlideKvTokens.
//
// Thread safety: a pure function.
#ifndef KVSESSION_MODEL_TURN_SLIDE_PLAN_H_
#define KVSESSION_MODEL_TURN_SLIDE_PLAN_H_

#include <cstdint>
#include <optional>
#include <span>

#include "model/kv_slide.h"

namespace kvs {

// The turn-aligned slide of a sequence holding `tokens`, of which the
// first `kv_length` have KV (the token at kv_length, if any, may also start
// the next turn: the dropped range may end there). `turn_start_ids` sorted.
// nullopt when no turn boundary allows a drop (no turn start at or after
// keep_tokens, or none after that within the KV; e.g. a single turn longer
// than the context, or a template without turn markers): the caller then
// slides by the page rule (PlanSlide).
std::optional<TokenSlide> PlanTurnSlide(std::span<const int32_t> tokens, int kv_length,
                                        int max_context, int keep_tokens,
                                        std::span<const int32_t> turn_start_ids);

}  // namespace kvs

#endif  // KVSESSION_MODEL_TURN_SLIDE_PLAN_H_
