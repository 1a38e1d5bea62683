// StopMatcher: decides how much generated text may be streamed when a
// request has stop strings.
//
// Text arrives in complete UTF-8 characters. Push() returns the part that is
// safe to send now: text that can no longer be (the start of) a stop string.
// A suffix that could still grow into a stop string is held back; when a
// stop string appears, Push() returns the text before it and stopped()
// becomes true (the stop string itself is never sent). Finish() releases
// what is held back when generation ends for another reason.
#ifndef KVSESSION_MODEL_STOP_MATCHER_H_
#define KVSESSION_MODEL_STOP_MATCHER_H_

#include <string>
#include <vector>

namespace kvs {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  std::string Push(const std::string& text);
  std::string Finish();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;  // text not yet sent
  bool stopped_ = false;
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_STOP_MATCHER_H_
