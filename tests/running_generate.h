// Test helper: RunningGenerate, a Generate that keeps a session busy while a
// test makes other calls. It runs on its own thread through the caller's
// client; WaitStarted() returns once its first token has arrived; Stop()
// cancels it (CANCELLED, unless it had already finished) and joins.
//
// The request should be long enough to outlast the test's checks: many
// tokens with ignore_eos, or CONTEXT_POLICY_SLIDE. The destructor stops it.
// `client` must outlive the RunningGenerate. One thread uses the object.
#ifndef KVSESSION_TESTS_RUNNING_GENERATE_H_
#define KVSESSION_TESTS_RUNNING_GENERATE_H_

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "client/kvsession_client.h"

namespace kvs {

class RunningGenerate {
 public:
  RunningGenerate(KvSessionClient& client, kvsession::v1::GenerateRequest request)
      : thread_([this, &client, request = std::move(request)] {
          (void)client.Generate(request, [this](const kvsession::v1::GenerateResponse&) {
            started_ = true;
            return !stop_.load();
          });
          finished_ = true;
        }) {}
  // A Generate of up to `max_tokens` tokens on `session_id`, ignoring EOS.
  RunningGenerate(KvSessionClient& client, const std::string& session_id, int max_tokens = 1500)
      : RunningGenerate(client, Request(session_id, max_tokens)) {}
  ~RunningGenerate() { Stop(); }
  RunningGenerate(const RunningGenerate&) = delete;
  RunningGenerate& operator=(const RunningGenerate&) = delete;

  // True once the first token has arrived; false if `timeout` passed first
  // or the call ended without a token.
  bool WaitStarted(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (!started_ && !finished_ && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return started_;
  }

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  static kvsession::v1::GenerateRequest Request(const std::string& session_id, int max_tokens) {
    kvsession::v1::GenerateRequest req;
    req.set_session_id(session_id);
    req.set_max_tokens(max_tokens);
    req.set_ignore_eos(true);
    return req;
  }

  std::atomic<bool> started_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> finished_{false};
  std::thread thread_;  // last: it starts once the flags exist
};

}  // namespace kvs

#endif  // KVSESSION_TESTS_RUNNING_GENERATE_H_
