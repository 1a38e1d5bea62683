#include "service/import_checks.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "service/context_policy.h"
#include "service/record_convert.h"

namespace kvs {

absl::Status CheckImportedSession(const SessionRecord& record, int32_t vocab_size, int32_t context_length,
                                  int32_t page_tokens) {
  for (const int32_t token : record.tokens()) {
    if (token < 0 || token >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("the stream's session holds token id ", token,
                                                     ", outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  // The last token is fed by the next Generate (service/session.h): a KV
  // over it would leave that Generate nothing to feed.
  if (record.kv_length() > std::max(0, record.tokens_size() - 1)) {
    return absl::InvalidArgumentError(absl::StrCat("the stream's session has KV for ", record.kv_length(),
                                                   " positions and ", record.tokens_size(),
                                                   " tokens; its KV may cover all of them but the last"));
  }
  if (absl::Status st = FromRecord(record.sampling()).ValidateFor(vocab_size); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the stream's session's sampling defaults: ", st.message()));
  }
  if (record.context_policy() != static_cast<int32_t>(ContextPolicy::kError) &&
      record.context_policy() != static_cast<int32_t>(ContextPolicy::kSlide)) {
    return absl::InvalidArgumentError(absl::StrCat("the stream's session has context policy ", record.context_policy(),
                                                   "; 0 (ERROR) or 1 (SLIDE)"));
  }
  if (record.keep_tokens() < 0 || record.keep_tokens() > context_length) {
    return absl::InvalidArgumentError(absl::StrCat("the stream's session has keep_tokens ", record.keep_tokens(),
                                                   "; [0, ", context_length, "] here"));
  }
  if (record.tokens_dropped() < 0 || record.tokens_dropped() >= (int64_t{1} << 62)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the stream's session has tokens_dropped ", record.tokens_dropped(), "; [0, 2^62) here"));
  }
  if (!record.slide_salt().empty() &&
      static_cast<int64_t>(record.slide_salt_page()) * page_tokens >= record.tokens_size()) {
    return absl::InvalidArgumentError(absl::StrCat("the stream's session has its slide salt at page ",
                                                   record.slide_salt_page(), ", past its ", record.tokens_size(),
                                                   " tokens"));
  }
  return absl::OkStatus();
}

}  // namespace kvs
