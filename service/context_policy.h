// ContextPolicy: what a session does when it reaches the context limit
// (kvsession.v1.ContextPolicy; the numbers are the stored record's,
// cache/session_record.proto context_policy).
//   kError  input that does not fit is OUT_OF_RANGE, a Generate ends with
//           LENGTH at the limit (the behaviour before policies existed);
//   kSlide  drop the oldest tokens after the kept prefix and go on
//           (model/kv_slide.h, SessionKv::Slide).
#ifndef KVSESSION_SERVICE_CONTEXT_POLICY_H_
#define KVSESSION_SERVICE_CONTEXT_POLICY_H_

#include <cstdint>

namespace kvs {

enum class ContextPolicy : int32_t { kError = 0, kSlide = 1 };

}  // namespace kvs

#endif  // KVSESSION_SERVICE_CONTEXT_POLICY_H_
