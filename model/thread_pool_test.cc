#include "model/thread_pool.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace kvs {
namespace {

// Both schedules, Run (a shared counter) and RunInSpans.
TEST(ThreadPoolTest, RunsEveryTaskExactlyOnceInEitherOrder) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.size(), 3);
  for (bool in_spans : {false, true}) {
    for (int n : {0, 1, 2, 3, 7, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> bad_thread{0};
      auto fn = [&](int task, int thread) {
        hits[task].fetch_add(1);
        if (thread < 0 || thread >= pool.size()) bad_thread.fetch_add(1);
      };
      if (in_spans) {
        pool.RunInSpans(n, fn);
      } else {
        pool.Run(n, fn);
      }
      for (int i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "spans " << in_spans << " n=" << n << " task " << i;
      EXPECT_EQ(bad_thread.load(), 0);
    }
  }
}

TEST(ThreadPoolTest, ManyBackToBackRunsAndSleepingWorkers) {
  ThreadPool pool(2);
  std::atomic<long> sum{0};
  for (int round = 0; round < 2000; ++round) {
    pool.Run(16, [&](int task, int) { sum.fetch_add(task); });
  }
  EXPECT_EQ(sum.load(), 2000L * (15 * 16 / 2));
  // Let the workers fall asleep, then wake them.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::atomic<int> count{0};
  pool.Run(64, [&](int, int) { count.fetch_add(1); });
  EXPECT_EQ(count.load(), 64);
}

TEST(ThreadPoolTest, WorkersShareTheLoad) {
  ThreadPool pool(2);
  std::set<int> threads_seen;
  std::mutex mu;
  pool.Run(64, [&](int, int thread) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::lock_guard<std::mutex> l(mu);
    threads_seen.insert(thread);
  });
  EXPECT_EQ(threads_seen.size(), 2u);
}

TEST(ThreadPoolTest, SpansCoverTheTasksInThreadOrderAndNearlyEqually) {
  ThreadPool pool(3);
  for (int n : {1, 2, 3, 10, 1000}) {
    EXPECT_EQ(pool.SpanEnd(n, pool.size() - 1), n);
    int begin = 0;
    for (int t = 0; t < pool.size(); ++t) {
      const int end = pool.SpanEnd(n, t);
      EXPECT_GE(end, begin);
      EXPECT_LE(end - begin, n / pool.size() + 1) << "n=" << n << " thread " << t;
      begin = end;
    }
  }
}

// Each thread's own tasks come in ascending order; what it takes from
// another span comes from that span's back, so in descending order.
TEST(ThreadPoolTest, EachThreadRunsItsOwnSpanInOrderAndTakesOthersFromTheBack) {
  ThreadPool pool(2);
  for (int round = 0; round < 200; ++round) {
    const int n = 64;
    std::vector<int> order[2];
    pool.RunInSpans(n, [&](int task, int thread) {
      order[thread].push_back(task);
      if (task % 7 == 0) std::this_thread::yield();  // uneven tasks, so stealing happens
    });
    for (int t = 0; t < 2; ++t) {
      const int begin = t == 0 ? 0 : pool.SpanEnd(n, 0), end = pool.SpanEnd(n, t);
      int last_own = -1, last_other = n;
      for (int task : order[t]) {
        if (task >= begin && task < end) {
          EXPECT_GT(task, last_own) << "thread " << t << " ran its own span out of order";
          last_own = task;
        } else {
          EXPECT_LT(task, last_other) << "thread " << t << " took another span's task not from its back";
          last_other = task;
        }
      }
    }
    EXPECT_EQ(order[0].size() + order[1].size(), static_cast<size_t>(n));
  }
}

// The caller never waits for a worker's span: while the worker is held up
// in its first task, the caller runs the rest of that span, from its back.
TEST(ThreadPoolTest, AThreadDoneWithItsSpanTakesASlowThreadsTasksFromTheBack) {
  ThreadPool pool(2);
  const int n = 10, worker_first = pool.SpanEnd(n, 0);
  std::atomic<bool> worker_started{false};
  std::vector<int> caller_order, worker_order;
  pool.RunInSpans(n, [&](int task, int thread) {
    (thread == 0 ? caller_order : worker_order).push_back(task);
    if (thread == 1 && task == worker_first) {
      worker_started = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    if (thread == 0 && task == 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (!worker_started && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    }
  });
  ASSERT_TRUE(worker_started.load());
  EXPECT_EQ(worker_order, std::vector<int>{worker_first});
  std::vector<int> expected;
  for (int t = 0; t < worker_first; ++t) expected.push_back(t);
  for (int t = n - 1; t > worker_first; --t) expected.push_back(t);
  EXPECT_EQ(caller_order, expected);
}

TEST(ThreadPoolTest, WorkersAreNamedKvsComputeSoTopAndPerfShowThem) {
  auto named = [] {
    int n = 0;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
      std::string name;
      std::getline(std::ifstream(task.path() / "comm"), name);
      n += name == "kvs-compute";
    }
    return n;
  };
  const int before = named();
  ThreadPool pool(3);
  // Workers name themselves when they start (give a loaded machine time).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (named() - before < 2 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(named() - before, 2);  // the caller is thread 0 and keeps its own name
}

}  // namespace
}  // namespace kvs
