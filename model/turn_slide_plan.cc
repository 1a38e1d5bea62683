#include "model/turn_slide_plan.h"

#include <algorithm>

namespace kvs {

std::optional<TokenSlide> PlanTurnSlide(std::span<const int32_t> tokens, int kv_length,
                                        int max_context, int keep_tokens,
                                        std::span<const int32_t> turn_start_ids) {
  if (turn_start_ids.empty()) return std::nullopt;
  // Positions where the dropped range may begin or end: within the KV, or
  // the next token to compute.
  const int last = std::min(kv_length, static_cast<int>(tokens.size()) - 1);
  auto is_start = [&](int p) {
    return std::binary_search(turn_start_ids.begin(), turn_start_ids.end(), tokens[p]);
  };
  int head = std::max(0, keep_tokens);
  while (head <= last && !is_start(head)) ++head;
  if (head >= last) return std::nullopt;  // nothing after the head can go
  const int target = head + std::max(1, (max_context - head) / 2);
  int end = -1;
  for (int p = head + 1; p <= last; ++p) {
    if (!is_start(p)) continue;
    end = p;  // the last one so far; the first one past the target wins
    if (p >= target) break;
  }
  if (end < 0) return std::nullopt;
  return TokenSlide{head, end - head};
}

}  // namespace kvs
