// Test helper: the real `kvsessiond` binary on a loopback port chosen by the
// kernel, with its stderr in a log file.
#ifndef KVSESSION_TESTS_SERVER_PROCESS_H_
#define KVSESSION_TESTS_SERVER_PROCESS_H_

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/subprocess.h"

namespace kvs {

class ServerProcess {
 public:
  // `binary`: the kvsessiond to run; empty for this build's (BinaryPath).
  explicit ServerProcess(std::string binary = {}) : binary_(std::move(binary)) {}

  // Starts kvsessiond on `model` with `data_dir`; waits until it serves.
  // Returns false (and leaves the log for inspection) if it does not.
  bool Start(const std::string& model, const std::string& data_dir,
             const std::vector<std::string>& extra_flags = {}) {
    port_file_ = data_dir + ".port";
    log_ = data_dir + ".log";
    std::filesystem::remove(port_file_);
    std::vector<std::string> argv = {binary_.empty() ? BinaryPath("kvsessiond") : binary_, "--model", model,
                                     "--listen", "127.0.0.1:0", "--data-dir", data_dir,
                                     "--port-file", port_file_, "--threads", "2"};
    argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
    if (!process_.Start(argv, log_ + ".out", log_)) return false;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < until) {
      if (std::filesystem::exists(port_file_)) {
        address_ = "127.0.0.1:" + Trim(ReadFile(port_file_));
        return true;
      }
      if (!process_.Running()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  const std::string& address() const { return address_; }
  pid_t pid() const { return process_.pid(); }
  std::string log() const { return ReadFile(log_); }

  // Graceful stop (SIGTERM); returns the exit code.
  int Stop() {
    process_.Signal(SIGTERM);
    return process_.Wait();
  }
  // SIGTERM without waiting (the server drains meanwhile); Wait() after.
  void Terminate() { process_.Signal(SIGTERM); }
  int Wait() { return process_.Wait(); }
  // kill -9: no chance to flush or clean up.
  void Kill() {
    process_.Signal(SIGKILL);
    process_.Wait();
  }
  bool Running() { return process_.Running(); }

 private:
  static std::string Trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }

  std::string binary_;
  ChildProcess process_;
  std::string port_file_;
  std::string log_;
  std::string address_;
};

}  // namespace kvs

#endif  // KVSESSION_TESTS_SERVER_PROCESS_H_
