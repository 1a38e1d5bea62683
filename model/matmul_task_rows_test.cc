// EvenOutSpans and SpanRows (matmul_task_rows.h), on the shapes of issue
// 11's Qwen3-0.6B model and on random ones, against ThreadPool's own spans.
#include "model/matmul_task_rows.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "model/thread_pool.h"

namespace kvs {
namespace {

// The rows of the largest span as ThreadPool::SpanEnd cuts the tasks.
int64_t LargestSpanByThePool(const ThreadPool& pool, const std::vector<int64_t>& rows,
                             const std::vector<int64_t>& chunk) {
  std::vector<int64_t> task_rows;
  for (size_t i = 0; i < rows.size(); ++i) {
    for (int64_t r0 = 0; r0 < rows[i]; r0 += chunk[i]) task_rows.push_back(std::min(chunk[i], rows[i] - r0));
  }
  const int n = static_cast<int>(task_rows.size());
  int64_t largest = 0;
  for (int t = 0; t < pool.size(); ++t) {
    const int begin = t == 0 ? 0 : pool.SpanEnd(n, t - 1);
    int64_t span = 0;
    for (int task = begin; task < pool.SpanEnd(n, t); ++task) span += task_rows[task];
    largest = std::max(largest, span);
  }
  return largest;
}

TEST(MatmulTaskRowsTest, AThousandRowMatrixInTasksOf192GivesTwoThreadsTheSameRows) {
  // Fan-out's output projection and down projection: 1,024 rows.
  const std::vector<int64_t> rows = {1024};
  std::vector<int64_t> chunk = {192};
  EXPECT_EQ(SpanRows(2, rows, chunk), 576) << "6 tasks, the last of 64: spans of 576 and 448";
  EvenOutSpans(2, rows, chunk);
  EXPECT_EQ(chunk[0], 256);
  EXPECT_EQ(SpanRows(2, rows, chunk), 512);
}

TEST(MatmulTaskRowsTest, CallsAlreadyEvenKeepTheirCut) {
  // Fan-out's q, k and v together (spans of 11 and 12 tasks, 2,048 rows
  // each), gate and up together (16 tasks each), and decode's output
  // matrix of a 151,936-token vocabulary (16 tasks, 64 rows apart).
  for (const auto& [rows, proposed] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{2048, 1024, 1024}, {192, 192, 192}}, {{3072, 3072}, {192, 192}}, {{151936}, {9504}}}) {
    std::vector<int64_t> chunk = proposed;
    EvenOutSpans(2, rows, chunk);
    EXPECT_EQ(chunk, proposed) << rows[0];
  }
}

TEST(MatmulTaskRowsTest, OneThreadOrMoreMatricesThanItHandlesKeepTheProposal) {
  std::vector<int64_t> chunk = {192};
  EvenOutSpans(1, std::vector<int64_t>{1024}, chunk);
  EXPECT_EQ(chunk[0], 192);
  std::vector<int64_t> rows(kMaxSpanMatrices + 1, 1024), many(kMaxSpanMatrices + 1, 192);
  EvenOutSpans(2, rows, many);
  EXPECT_EQ(many, std::vector<int64_t>(kMaxSpanMatrices + 1, 192));
}

TEST(MatmulTaskRowsTest, SpanRowsIsWhatThePoolsSpansCarry) {
  std::mt19937 rng(7);
  for (int threads : {2, 3, 4}) {
    ThreadPool pool(threads);
    for (int trial = 0; trial < 200; ++trial) {
      const int n = 1 + static_cast<int>(rng() % kMaxSpanMatrices);
      std::vector<int64_t> rows(n), chunk(n);
      for (int i = 0; i < n; ++i) {
        rows[i] = 16 * (1 + static_cast<int64_t>(rng() % 400));
        chunk[i] = 16 * (1 + static_cast<int64_t>(rng() % 24));
      }
      EXPECT_EQ(SpanRows(threads, rows, chunk), LargestSpanByThePool(pool, rows, chunk));
    }
  }
}

TEST(MatmulTaskRowsTest, EveningOutNeverShortensATaskNorLengthensTheLargestSpan) {
  std::mt19937 rng(11);
  int changed = 0;
  for (int threads : {2, 3, 4}) {
    for (int trial = 0; trial < 500; ++trial) {
      const int n = 1 + static_cast<int>(rng() % 3);
      std::vector<int64_t> rows(n), proposed(n);
      for (int i = 0; i < n; ++i) {
        rows[i] = 16 * (1 + static_cast<int64_t>(rng() % 400));
        proposed[i] = 16 * (4 + static_cast<int64_t>(rng() % 20));
      }
      std::vector<int64_t> chunk = proposed;
      EvenOutSpans(threads, rows, chunk);
      const int64_t longest = *std::max_element(proposed.begin(), proposed.end());
      for (int i = 0; i < n; ++i) {
        EXPECT_GE(chunk[i], proposed[i]);
        EXPECT_LE(chunk[i], 2 * longest);
        EXPECT_EQ(chunk[i] % 16, 0);
      }
      EXPECT_LE(SpanRows(threads, rows, chunk), SpanRows(threads, rows, proposed));
      changed += chunk != proposed;
    }
  }
  EXPECT_GT(changed, 0) << "some random cuts are uneven enough to change";
}

}  // namespace
}  // namespace kvs
