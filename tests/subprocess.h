// Test helpers to run the project's real binaries as child processes.
#ifndef KVSESSION_TESTS_SUBPROCESS_H_
#define KVSESSION_TESTS_SUBPROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kvs {

inline std::string BinaryPath(const std::string& name) {
  // Appended in place: GCC 12 reports a false -Warray-bounds on a chain of
  // operator+ on a temporary once this is inlined into a caller.
  std::string path = KVS_BINARY_DIR;
  path.append("/bin/").append(name);
  return path;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A child process whose stdout and stderr go to files.
class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      Wait();
    }
  }

  // stdin reads `in_path`.
  bool Start(const std::vector<std::string>& argv, const std::string& out_path,
             const std::string& err_path, const std::string& in_path = "/dev/null") {
    pid_ = ::fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int in = ::open(in_path.c_str(), O_RDONLY);
      ::dup2(out, 1);
      ::dup2(err, 2);
      ::dup2(in, 0);
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      std::perror("execv");
      ::_exit(127);
    }
    return true;
  }

  pid_t pid() const { return pid_; }
  void Signal(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  // Waits for exit; returns the exit code, or 128 + signal.
  int Wait() {
    if (pid_ <= 0) return status_;
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return status_;
  }
  bool Running() {
    if (pid_ <= 0) return false;
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == 0) return true;
    pid_ = -1;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return false;
  }

 private:
  pid_t pid_ = -1;
  int status_ = -1;
};

struct ProcessResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs argv to completion, capturing stdout and stderr; stdin reads
// `in_path`.
inline ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& tmp_dir,
                                const std::string& in_path = "/dev/null") {
  static int counter = 0;
  const std::string base = tmp_dir + "/proc" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
  ChildProcess child;
  ProcessResult r;
  if (!child.Start(argv, base + ".out", base + ".err", in_path)) return r;
  r.exit_code = child.Wait();
  r.out = ReadFile(base + ".out");
  r.err = ReadFile(base + ".err");
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return r;
}

}  // namespace kvs

#endif  // KVSESSION_TESTS_SUBPROCESS_H_
