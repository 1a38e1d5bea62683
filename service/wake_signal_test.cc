// WakeSignal: a wake is never lost, whether it comes before or during the
// wait, and the wait clears it; without one the wait ends at its deadline.
#include "service/wake_signal.h"

#include <gtest/gtest.h>

#include <thread>

#include "absl/time/clock.h"

namespace kvs {
namespace {

TEST(WakeSignal, AWakeBeforeTheWaitEndsItAtOnceAndIsCleared) {
  WakeSignal signal;
  signal.Wake();
  signal.Wake();  // sticky, not counted
  EXPECT_TRUE(signal.WaitAndClear(absl::Now() + absl::Seconds(30)));
  EXPECT_FALSE(signal.WaitAndClear(absl::Now() + absl::Milliseconds(20))) << "cleared by the first wait";
}

TEST(WakeSignal, AWaitWithoutAWakeEndsAtItsDeadline) {
  WakeSignal signal;
  const absl::Time start = absl::Now();
  EXPECT_FALSE(signal.WaitAndClear(start + absl::Milliseconds(50)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(49));
}

TEST(WakeSignal, AWakeFromAnotherThreadEndsTheWait) {
  WakeSignal signal;
  std::thread waker([&] {
    absl::SleepFor(absl::Milliseconds(20));  // most likely while the wait is under way
    signal.Wake();
  });
  EXPECT_TRUE(signal.WaitAndClear(absl::Now() + absl::Seconds(30)));
  waker.join();
}

}  // namespace
}  // namespace kvs
