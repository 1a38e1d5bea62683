// ChatState: what a session knows about the conversation it holds, so that
// chat messages render incrementally and a Generate knows whether to start
// an assistant turn. Persisted in the session record (SessionRecord.chat,
// chat_turn_open), so a restarted server continues a conversation exactly.
//
// A plain value; a Session's copy is written by its holder under tokens_mu
// (like its tokens) and read by others under tokens_mu.
#ifndef KVSESSION_SERVICE_CHAT_STATE_H_
#define KVSESSION_SERVICE_CHAT_STATE_H_

#include <cstdint>
#include <vector>

namespace kvs {

struct ChatState {
  // Chat messages were appended: the session holds the conversation's
  // start (the template's BOS / default system prompt), and later messages
  // render only their own turns.
  bool started = false;
  // The last assistant turn is open: its generation prompt was added and no
  // end-of-turn token closed it yet.
  bool turn_open = false;

  bool operator==(const ChatState&) const = default;
};

// What a job does to a session's chat state (service/engine.h): the state
// once its input is appended, and, when generation stops on one of
// `end_of_turn_ids`, the tokens that follow that token (the template's text
// after an end-of-turn, "\n" for ChatML), which close the turn.
struct ChatJob {
  ChatState after_input;
  std::vector<int32_t> end_of_turn_ids;  // sorted
  std::vector<int32_t> after_end_of_turn;
  // Where a SLIDE may cut the conversation (model/turn_slide_plan.h):
  // the template's turn-opening tokens (sorted; empty: slide by pages) and
  // the length of its conversation start that is a turn of its own.
  std::vector<int32_t> turn_start_ids;
  int conversation_start_tokens = 0;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_CHAT_STATE_H_
