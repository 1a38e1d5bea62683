// TrapOnProtobufUtf8Log: makes a protobuf log line about invalid UTF-8 a
// fuzzing finding.
//
// Protobuf's parser logs an ERROR line for each string field of invalid
// UTF-8 it meets. Wherever client bytes reach a parser (a request, a
// migration stream's record), the walk of proto/utf8_field_finder.h must
// refuse them first, so such a line means hostile input could buy a server
// log line per call. Once installed (process-wide, for the fuzz target's
// life), the handler prints that line with the target's name and traps;
// protobuf's other log lines are printed as protobuf would.
#ifndef KVSESSION_FUZZ_PROTOBUF_UTF8_LOG_H_
#define KVSESSION_FUZZ_PROTOBUF_UTF8_LOG_H_

#include <cstdio>
#include <string>

#include <google/protobuf/stubs/logging.h>

namespace kvs::fuzz {

namespace internal {
inline const char*& Utf8LogTarget() {
  static const char* target = "fuzz";
  return target;
}
inline void OnProtobufLog(google::protobuf::LogLevel, const char* filename, int line, const std::string& message) {
  if (message.find("invalid UTF-8") != std::string::npos) {
    std::fprintf(stderr, "%s: the parser met invalid UTF-8 no walk refused first: %s\n", Utf8LogTarget(),
                 message.c_str());
    std::fflush(stderr);
    __builtin_trap();
  }
  std::fprintf(stderr, "[libprotobuf %s:%d] %s\n", filename, line, message.c_str());
}
}  // namespace internal

// `target` (a string literal) names the fuzz target in the finding.
inline void TrapOnProtobufUtf8Log(const char* target) {
  internal::Utf8LogTarget() = target;
  google::protobuf::SetLogHandler(&internal::OnProtobufLog);
}

}  // namespace kvs::fuzz

#endif  // KVSESSION_FUZZ_PROTOBUF_UTF8_LOG_H_
