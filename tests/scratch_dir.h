// Test-only: ScratchDir, a fresh empty directory for one test, removed with
// everything in it when the ScratchDir is destroyed.
//
// The name is <temp>/<tag>_<pid>_<test name>_<n>: the process id keeps
// concurrent test processes (ctest -j) apart, the running test's name (with
// any '/' of a parameterized test turned into '_') says whose it was, and n
// counts the ScratchDirs made in this process, so two in one test differ. A
// directory left behind by a crashed earlier run of the same name is removed
// first. <temp> is std::filesystem::temp_directory_path() (TMPDIR, else /tmp).
//
// Owners declare their ScratchDir before anything that keeps files open in
// it (a SessionStore, a server process): members are destroyed in reverse
// order, so the directory goes last. A failure to make the directory throws
// std::filesystem::filesystem_error (the test fails); a failure to remove it
// is ignored. Not thread-safe: make and destroy each ScratchDir on one thread
// (the counter is atomic).
#ifndef KVSESSION_TESTS_SCRATCH_DIR_H_
#define KVSESSION_TESTS_SCRATCH_DIR_H_

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace kvs {

class ScratchDir {
 public:
  explicit ScratchDir(std::string_view tag) {
    static std::atomic<int> made{0};
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string test_name = test != nullptr ? test->name() : "no_test";
    std::replace(test_name.begin(), test_name.end(), '/', '_');
    path_ = std::filesystem::temp_directory_path() /
            (std::string(tag) + "_" + std::to_string(::getpid()) + "_" + test_name + "_" +
             std::to_string(made.fetch_add(1)));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;  // a destructor must not throw; a leftover is harmless
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // path() as a string, for APIs that take one (SessionStore::Open, flags).
  std::string string() const { return path_.string(); }
  // The path of `name` inside the directory (not created).
  std::string file(std::string_view name) const { return (path_ / std::string(name)).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace kvs

#endif  // KVSESSION_TESTS_SCRATCH_DIR_H_
