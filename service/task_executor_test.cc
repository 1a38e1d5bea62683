// TaskExecutor: tasks inside a BlockingWait do not hold up the queue, the
// spare threads are bounded, and outside waits no more than n_threads
// tasks run at once.
#include "service/task_executor.h"

#include <atomic>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace kvs {
namespace {

TEST(TaskExecutor, ATaskWaitingInABlockingWaitLetsTheTaskItWaitsForRunOnItsOneThread) {
  TaskExecutor io(1);
  absl::Notification released, waited;
  bool in_time = false;
  io.Submit([&] {
    BlockingWait wait;
    in_time = released.WaitForNotificationWithTimeout(absl::Seconds(30));
    waited.Notify();
  });
  io.Submit([&] { released.Notify(); });
  waited.WaitForNotification();
  EXPECT_TRUE(in_time) << "the second task waited behind the first";
  EXPECT_EQ(io.started_threads(), 2);
}

TEST(TaskExecutor, AtMostMaxSpareThreadsStartAndQueuedTasksRunWhenTheWaitsEnd) {
  TaskExecutor io(1, /*max_spare_threads=*/2);
  absl::Notification go;
  std::atomic<int> started{0}, finished{0};
  for (int i = 0; i < 5; ++i) {
    io.Submit([&] {
      ++started;
      BlockingWait wait;
      go.WaitForNotification();
      ++finished;
    });
  }
  // One thread plus two spares, each inside a wait; the other two queue.
  for (int i = 0; i < 3000 && started.load() < 3; ++i) absl::SleepFor(absl::Milliseconds(1));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(started.load(), 3);
  EXPECT_EQ(io.started_threads(), 3);
  go.Notify();
  for (int i = 0; i < 3000 && finished.load() < 5; ++i) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(finished.load(), 5);
  EXPECT_EQ(io.started_threads(), 3);
}

TEST(TaskExecutor, OutsideWaitsNoMoreThanItsThreadsRunAtOnce) {
  TaskExecutor io(2);
  std::atomic<int> now{0}, most{0};
  absl::Notification done;
  std::atomic<int> left{40};
  for (int i = 0; i < 40; ++i) {
    io.Submit([&] {
      const int n = ++now;
      int m = most.load();
      while (n > m && !most.compare_exchange_weak(m, n)) {
      }
      absl::SleepFor(absl::Milliseconds(1));
      --now;
      if (--left == 0) done.Notify();
    });
  }
  done.WaitForNotification();
  EXPECT_LE(most.load(), 2);
  EXPECT_EQ(io.started_threads(), 2);
}

TEST(TaskExecutor, ItsDestructorRunsTheQueuedTaskAWaitingTaskWaitsFor) {
  auto io = std::make_unique<TaskExecutor>(1);
  absl::Notification released;
  bool in_time = false;
  io->Submit([&] {
    absl::SleepFor(absl::Milliseconds(100));  // the destructor has begun
    BlockingWait wait;
    in_time = released.WaitForNotificationWithTimeout(absl::Seconds(20));
  });
  io->Submit([&] { released.Notify(); });
  io.reset();  // runs both, then joins
  EXPECT_TRUE(in_time) << "the queued task ran only after the wait gave up";
}

TEST(TaskExecutor, ABlockingWaitOffTheExecutorsThreadsChangesNothing) {
  TaskExecutor io(1);
  { BlockingWait wait; }
  absl::Notification ran;
  io.Submit([&] { ran.Notify(); });
  EXPECT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(io.started_threads(), 1);
}

}  // namespace
}  // namespace kvs
