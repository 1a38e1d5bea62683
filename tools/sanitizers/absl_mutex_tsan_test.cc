// Built only in the ThreadSanitizer build: checks that TSan sees absl::Mutex
// through tools/sanitizers/absl_mutex_tsan.cc. Without those annotations
// every access below is a data race to TSan (Debian's absl is uninstrumented)
// and the process exits with TSan's exit code, failing the test.
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace {

constexpr int kThreads = 4, kRounds = 2000;

TEST(AbslMutexUnderThreadSanitizer, ExclusiveAndSharedLocksOrderTheAccessesTheyGuard) {
  absl::Mutex mu;
  long counter = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        { absl::MutexLock lock(&mu); ++counter; }
        { absl::ReaderMutexLock lock(&mu); ASSERT_GT(counter, 0); }
        if (mu.TryLock()) { ++counter; mu.Unlock(); }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  absl::MutexLock lock(&mu);
  EXPECT_GE(counter, kThreads * kRounds);
}

TEST(AbslMutexUnderThreadSanitizer, AwaitAndCondVarWaitHandTheLockOver) {
  absl::Mutex mu;
  absl::CondVar cv;
  int stage = 0;
  std::thread producer([&] {
    { absl::MutexLock lock(&mu); stage = 1; }
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(+[](int* s) { return *s == 2; }, &stage));
    stage = 3;
    cv.Signal();
  });
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(+[](int* s) { return *s == 1; }, &stage));
    stage = 2;
    while (stage != 3) cv.Wait(&mu);
  }
  producer.join();
  EXPECT_EQ(stage, 3);
}

}  // namespace
