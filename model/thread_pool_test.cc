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

TEST(ThreadPoolTest, RunsEveryTaskExactlyOnce) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.size(), 3);
  for (int n : {0, 1, 2, 7, 1000}) {
    std::vector<std::atomic<int>> hits(n);
    std::atomic<int> bad_thread{0};
    pool.Run(n, [&](int task, int thread) {
      hits[task].fetch_add(1);
      if (thread < 0 || thread >= pool.size()) bad_thread.fetch_add(1);
    });
    for (int i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n=" << n << " task " << i;
    EXPECT_EQ(bad_thread.load(), 0);
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
