// Test helper: what protobuf logs while a ProtobufLogCapture is alive, so a
// test can assert that hostile or damaged bytes were refused without a log
// line (proto/utf8_field_finder.h). Installs a process-wide log handler and
// puts the previous one back when it ends; one at a time, not thread-safe.
#ifndef KVSESSION_PROTO_PROTOBUF_LOG_CAPTURE_TEST_UTIL_H_
#define KVSESSION_PROTO_PROTOBUF_LOG_CAPTURE_TEST_UTIL_H_

#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>

namespace kvs {

class ProtobufLogCapture {
 public:
  ProtobufLogCapture() {
    lines().clear();
    previous_ = google::protobuf::SetLogHandler(&Record);
  }
  ~ProtobufLogCapture() { google::protobuf::SetLogHandler(previous_); }
  ProtobufLogCapture(const ProtobufLogCapture&) = delete;
  ProtobufLogCapture& operator=(const ProtobufLogCapture&) = delete;

  // The messages logged since this capture began.
  static std::vector<std::string>& lines() {
    static std::vector<std::string> kLines;
    return kLines;
  }

 private:
  static void Record(google::protobuf::LogLevel, const char*, int, const std::string& message) {
    lines().push_back(message);
  }
  google::protobuf::LogHandler* previous_;
};

}  // namespace kvs

#endif  // KVSESSION_PROTO_PROTOBUF_LOG_CAPTURE_TEST_UTIL_H_
