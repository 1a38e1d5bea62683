// Engine with a real model, session manager and store: what one step
// plans (decode before prefill under the token budget, prefill chunks,
// forks grouped without changing what each streams), a step's tokens
// drawn side by side on the pool as each would be alone, and cancellation
// seen within one step.
#include "service/engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <utility>

#include "absl/synchronization/notification.h"
#include "cache/fault_injection_fs.h"
#include "service/service_test_env.h"
#include "service/task_executor.h"

namespace kvs {
namespace {

// Records what a job streamed and how it ended; optionally cancels its own
// job after `cancel_after` tokens (from the engine thread, as a client
// cancellation would arrive between steps).
class RecordingListener : public JobListener {
 public:
  void OnToken(const GeneratedToken& token, const std::string& text) override {
    ids.push_back(token.id);
    // What logprobs report (empty unless asked for): the token's, then
    // each of the top ones' id and logprob.
    if (!token.top.empty()) logprobs.push_back(token.logprob);
    for (const TokenLogprob& top : token.top) {
      logprobs.push_back(static_cast<float>(top.id));
      logprobs.push_back(top.logprob);
    }
    if (ids.size() == 1 && hold_first_token != nullptr) hold_first_token->WaitForNotification();
    if (cancel_after > 0 && static_cast<int>(ids.size()) == cancel_after) handle->Cancel();
    if (after_token) after_token(static_cast<int>(ids.size()));
  }
  void OnDone(const absl::Status& st, FinishReason r, const JobUsage& u, const std::string&,
              const SessionInfo&) override {
    status = st;
    reason = r;
    usage = u;
    done.Notify();
  }
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  int cancel_after = 0;
  // When set, the engine thread waits at the first token until it is
  // notified (so a test can line up another job beside this one).
  absl::Notification* hold_first_token = nullptr;
  // Called on the engine thread after each token, with the count so far.
  std::function<void(int)> after_token;
  std::shared_ptr<JobHandle> handle = std::make_shared<JobHandle>();
  absl::Status status;
  FinishReason reason = FinishReason::kNone;
  JobUsage usage;
  absl::Notification done;
};

class EngineTest : public ::testing::Test {
 protected:
  void Start(int max_batch_tokens, int threads = 1, int io_threads = 1, StoreOptions store = {},
             int64_t pool_pages = 256) {
    env_ = std::make_unique<ServiceTestEnv>(pool_pages, 16, std::move(store));
    io_ = std::make_unique<TaskExecutor>(io_threads);
    EngineOptions options;
    options.threads = threads;
    options.max_batch_tokens = max_batch_tokens;
    options.idle_queue_grace = idle_queue_grace_;
    options.step_observer = [this](const StepReport& r) {
      absl::MutexLock lock(&mu_);
      steps_.push_back(r);
    };
    engine_ = std::make_unique<Engine>(env_->model(), &env_->sessions(), io_.get(), options);
  }
  void TearDown() override {
    if (engine_) engine_->Stop();
    engine_.reset();
    io_.reset();
    env_.reset();
  }

  std::shared_ptr<RecordingListener> Submit(const std::string& id, std::vector<int32_t> input,
                                            std::optional<GenerateOptions> gen, int cancel_after = 0,
                                            absl::Notification* hold_first_token = nullptr,
                                            absl::Time deadline = absl::InfiniteFuture(),
                                            std::function<void(int)> after_token = nullptr) {
    auto s = env_->sessions().Acquire(id);
    EXPECT_TRUE(s.ok()) << s.status();
    return SubmitAcquired(*s, std::move(input), std::move(gen), cancel_after, hold_first_token, deadline,
                          std::move(after_token));
  }
  // Submit for a session the test acquired itself.
  std::shared_ptr<RecordingListener> SubmitAcquired(std::shared_ptr<Session> s, std::vector<int32_t> input,
                                                    std::optional<GenerateOptions> gen, int cancel_after = 0,
                                                    absl::Notification* hold_first_token = nullptr,
                                                    absl::Time deadline = absl::InfiniteFuture(),
                                                    std::function<void(int)> after_token = nullptr) {
    EXPECT_TRUE(engine_->Validate(*s, input, gen).ok());
    auto listener = std::make_shared<RecordingListener>();
    listener->cancel_after = cancel_after;
    listener->hold_first_token = hold_first_token;
    listener->after_token = std::move(after_token);
    const int prompt_tokens = static_cast<int>(input.size());  // as the service reports an existing session's
    engine_->Submit(std::move(s), std::move(input), prompt_tokens, std::move(gen), listener, listener->handle,
                    deadline);
    return listener;
  }
  // A new session (BOS only) takes 100 tokens as one job, answered OK: 100
  // KV positions, 6 full pages of 16 and a partial one.
  void PrefillAHundredTokensAfterBos() {
    const std::string id = env_->MakeSession(0);
    std::vector<int32_t> input(100);
    for (int i = 0; i < 100; ++i) input[i] = 40 + i;
    auto job = Submit(id, input, std::nullopt);
    job->done.WaitForNotification();
    ASSERT_TRUE(job->status.ok()) << job->status;
  }
  static GenerateOptions Greedy(int max_tokens) {
    GenerateOptions g;
    g.max_tokens = max_tokens;
    g.sampling.temperature = 0;
    g.ignore_eos = true;
    return g;
  }
  std::vector<StepReport> Steps() {
    absl::MutexLock lock(&mu_);
    return steps_;
  }
  // How many steps decoded exactly `rows` rows together.
  int StepsDecoding(int rows) {
    int n = 0;
    for (const StepReport& r : Steps()) n += r.decode_rows == rows;
    return n;
  }
  // Whether the engine's queue holds `n` calls within `timeout`.
  bool QueuedWithin(int n, absl::Duration timeout) {
    for (const absl::Time end = absl::Now() + timeout; absl::Now() < end; absl::SleepFor(absl::Milliseconds(5))) {
      if (engine_->Stats().queued_jobs == n) return true;
    }
    return false;
  }
  // Waits for every job; each must have ended OK.
  static void WaitForAll(const std::vector<std::shared_ptr<RecordingListener>>& jobs) {
    for (const auto& job : jobs) {
      job->done.WaitForNotification();
      ASSERT_TRUE(job->status.ok()) << job->status;
    }
  }

  // Set before Start: a long one leaves a queue with nothing running only
  // to what wakes it.
  absl::Duration idle_queue_grace_ = absl::Seconds(1);
  std::unique_ptr<ServiceTestEnv> env_;
  std::unique_ptr<TaskExecutor> io_;
  std::unique_ptr<Engine> engine_;
  absl::Mutex mu_;
  std::vector<StepReport> steps_;
};

// A session whose KV covers its last token (no call leaves one, but a
// stored record could say so) gives a Generate nothing to feed: refused at
// once, not a job that no step ever serves until its deadline.
TEST_F(EngineTest, ASessionWhoseKvCoversItsLastTokenIsRefusedRatherThanNeverServed) {
  KVS_REQUIRE_SHARED_MODEL();
  Start(/*max_batch_tokens=*/64);
  const std::string id = env_->MakeSession(20);  // BOS + 20 tokens, KV for 20
  auto s = env_->sessions().Acquire(id);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(engine_->Validate(**s, {}, Greedy(1)).ok());
  int32_t last = 0;
  {
    absl::MutexLock lock(&(*s)->tokens_mu);
    last = (*s)->tokens.back();
    (*s)->tokens.pop_back();  // KV for 20 of 20 tokens
  }
  const absl::Status st = engine_->Validate(**s, {}, Greedy(1));
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr("covers 20 positions of its 20 tokens"));
  const std::vector<int32_t> input = {42};
  EXPECT_TRUE(engine_->Validate(**s, input, Greedy(1)).ok()) << "input gives it a token to feed";
  (*s)->AppendTokens({&last, 1});
  env_->sessions().Release(*s);
}

TEST_F(EngineTest, APrefillIsCutIntoChunksOfTheStepBudget) {
  KVS_REQUIRE_SHARED_MODEL();
  Start(/*max_batch_tokens=*/16);
  const std::string id = env_->MakeSession(0);  // BOS only
  std::vector<int32_t> input(50);
  for (int i = 0; i < 50; ++i) input[i] = 20 + i;
  auto job = Submit(id, input, std::nullopt);
  job->done.WaitForNotification();
  ASSERT_TRUE(job->status.ok()) << job->status;
  // BOS + 50 tokens: the KV needs the first 50 positions (not the last token's).
  std::vector<int> chunks;
  for (const StepReport& r : Steps()) {
    if (r.prefill_chunks > 0) chunks.push_back(r.prefill_tokens);
  }
  EXPECT_EQ(chunks, (std::vector<int>{16, 16, 16, 2}));
  EXPECT_EQ(env_->sessions().Get(id, false)->length, 51);
}

TEST_F(EngineTest, AChunkedPrefillStagesItsPagesAndStoresExactlyThemOneFileEach) {
  KVS_REQUIRE_SHARED_MODEL();
  Start(/*max_batch_tokens=*/16);
  ASSERT_NO_FATAL_FAILURE(PrefillAHundredTokensAfterBos());
  engine_->Stop();
  engine_.reset();
  io_.reset();  // runs the staging tasks that may still be queued
  int64_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(env_->dir() + "/pages")) {
    files += e.path().extension() == ".kvpage";
  }
  // 100 KV positions: 6 full pages and a partial one, all stored, nothing else.
  EXPECT_EQ(env_->store().Stats().pages, 7);
  EXPECT_EQ(files, 7);
  EXPECT_TRUE(env_->store().Verify()->ok());
}

TEST_F(EngineTest, AOneStepPrefillWritesEachPageFileOnceAndIsAnsweredWhenAllAreStored) {
  KVS_REQUIRE_SHARED_MODEL();
  // Two I/O threads, so the final persist could run beside the staging of
  // the step's pages; it waits for them instead of writing them again.
  auto fs = std::make_shared<FaultInjectionFileSystem>();
  StoreOptions store;
  store.file_system = fs;
  Start(/*max_batch_tokens=*/512, /*threads=*/1, /*io_threads=*/2, store);
  ASSERT_NO_FATAL_FAILURE(PrefillAHundredTokensAfterBos());
  // 100 KV positions: 6 full pages (staged) and a partial one (the persist's).
  int page_writes = 0;
  for (const std::string& path : fs->CreatedFiles()) page_writes += path.ends_with(".kvpage.tmp");
  EXPECT_EQ(page_writes, 7);
  EXPECT_EQ(env_->store().Stats().pages, 7);
  EXPECT_TRUE(env_->store().Verify()->ok());
  int prefill_steps = 0;
  for (const StepReport& r : Steps()) prefill_steps += r.prefill_chunks > 0;
  EXPECT_EQ(prefill_steps, 1);
}

TEST_F(EngineTest, AFinishedCallIsNoLongerCountedAsActiveWhenItIsAnswered) {
  KVS_REQUIRE_SHARED_MODEL();
  Start(/*max_batch_tokens=*/16);
  const std::string id = env_->MakeSession(0);
  auto job = Submit(id, {20, 21, 22}, Greedy(4));
  job->done.WaitForNotification();
  ASSERT_TRUE(job->status.ok()) << job->status;
  // The engine is idle now: it waits for work and takes no further step.
  const EngineStats stats = engine_->Stats();
  EXPECT_EQ(stats.active_jobs, 0);
  EXPECT_EQ(stats.queued_jobs, 0);
  EXPECT_GT(stats.steps, 0);
}

TEST_F(EngineTest, DecodeTokensGoFirstAndPrefillGetsTheRestOfTheBudget) {
  KVS_REQUIRE_SHARED_MODEL();
  Start(/*max_batch_tokens=*/8);
  const std::string generating = env_->MakeSession(10, 30);
  const std::string appending = env_->MakeSession(0);
  // The generation's first token holds the engine until the long prefill
  // is submitted, so the two run side by side from the next step on.
  absl::Notification append_submitted;
  auto gen = Submit(generating, {}, Greedy(100), 0, &append_submitted);
  std::vector<int32_t> input(60, 42);
  auto append = Submit(appending, input, std::nullopt);
  append_submitted.Notify();
  append->done.WaitForNotification();
  gen->done.WaitForNotification();
  ASSERT_TRUE(append->status.ok()) << append->status;
  ASSERT_TRUE(gen->status.ok()) << gen->status;
  EXPECT_EQ(gen->ids.size(), 100u);

  int shared_steps = 0;
  for (const StepReport& r : Steps()) {
    EXPECT_LE(r.decode_rows + r.prefill_tokens, 8) << "the step budget is 8 tokens";
    if (r.prefill_chunks == 0) continue;
    // While both jobs run, the generating job gets its token in every step
    // and the prefill takes the other 7.
    if (r.decode_rows == 1) {
      EXPECT_LE(r.prefill_tokens, 7);
      shared_steps += r.prefill_tokens == 7;
    }
  }
  EXPECT_EQ(shared_steps, 60 / 7) << "60 prefill tokens go 7 per step beside the decode token";
}

TEST_F(EngineTest, ACancelledGenerationEndsAtTheNextStepAndKeepsItsTokens) {
  KVS_REQUIRE_SHARED_MODEL();
  Start(/*max_batch_tokens=*/64);
  const std::string id = env_->MakeSession(10);
  auto job = Submit(id, {}, Greedy(100), /*cancel_after=*/5);
  job->done.WaitForNotification();
  EXPECT_EQ(job->reason, FinishReason::kCancelled);
  EXPECT_TRUE(absl::IsCancelled(job->status)) << job->status;
  EXPECT_EQ(job->ids.size(), 5u) << "no token after the step that saw the cancel";
  EXPECT_EQ(job->usage.generated_tokens, 5);
  // The session keeps (and has persisted) what was generated.
  EXPECT_EQ(env_->sessions().Get(id, false)->length, 11 + 5);
  // A restart: the engine goes before the session manager it uses.
  engine_->Stop();
  engine_.reset();
  env_->Reopen();
  EXPECT_EQ(env_->sessions().Get(id, true)->tokens.size(), 16u);
}

// A call waits in the queue for KV memory until its deadline; one whose
// deadline has passed when the engine looks at it ends RESOURCE_EXHAUSTED
// naming what it needed, and its session is as it was.
TEST_F(EngineTest, ACallWhoseDeadlinePassedWhileItWaitedIsResourceExhaustedAndChangesNothing) {
  KVS_REQUIRE_SHARED_MODEL();
  Start(/*max_batch_tokens=*/64);
  const std::string id = env_->MakeSession(10);
  auto job = Submit(id, {7, 8, 9}, Greedy(4), 0, nullptr, absl::Now() - absl::Seconds(1));
  job->done.WaitForNotification();
  EXPECT_TRUE(absl::IsResourceExhausted(job->status)) << job->status;
  EXPECT_THAT(std::string(job->status.message()),
              ::testing::HasSubstr("no KV memory for this call before its deadline: it needs "));
  EXPECT_TRUE(job->ids.empty());
  EXPECT_EQ(job->usage.prompt_tokens, 0) << "the input was never added";
  EXPECT_EQ(job->usage.session_tokens, 11);
  EXPECT_EQ(env_->sessions().Get(id, false)->length, 11);
}

// Two calls queue for KV memory with nothing running: each one's session
// is loaded for it (so it cannot be evicted) and together they hold the
// pages the other needs. Waiting frees nothing, so after a second the head
// is refused; its session, released, is evicted for the other, which runs.
TEST_F(EngineTest, WhenTheCallsWaitingHoldThePagesEachNeedsTheHeadIsRefusedAndTheNextRuns) {
  KVS_REQUIRE_SHARED_MODEL();
  // 13 pages of 16 tokens: two sessions of 80 tokens hold 10; each call
  // may grow its session to 120 tokens, 8 pages: 4 more each (one for
  // copy-on-write), and 3 are free.
  Start(/*max_batch_tokens=*/64, 1, 1, {}, /*pool_pages=*/13);
  const std::string x = env_->MakeSession(79);
  const std::string y = env_->MakeSession(79, 400);
  ASSERT_TRUE(env_->sessions().Get(x, false)->resident);
  ASSERT_TRUE(env_->sessions().Get(y, false)->resident);
  // Both acquired (their KV held for their calls) before either is
  // submitted: else the engine could evict y's idle session for x.
  auto sx = env_->sessions().Acquire(x);
  auto sy = env_->sessions().Acquire(y);
  ASSERT_TRUE(sx.ok() && sy.ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  auto first = SubmitAcquired(*sx, {}, Greedy(40), 0, nullptr, deadline);
  auto second = SubmitAcquired(*sy, {}, Greedy(40), 0, nullptr, deadline);
  first->done.WaitForNotification();
  EXPECT_TRUE(absl::IsResourceExhausted(first->status)) << first->status;
  EXPECT_THAT(std::string(first->status.message()), ::testing::HasSubstr("no call is running"));
  EXPECT_TRUE(first->ids.empty());
  second->done.WaitForNotification();
  ASSERT_TRUE(second->status.ok()) << second->status;
  EXPECT_EQ(second->ids.size(), 40u);
  EXPECT_EQ(env_->sessions().Get(x, false)->length, 80);  // as it was
}

// Queued calls with nothing running, in the tests below. The engine's
// idle grace is a minute, so only what wakes the queue moves it. 13 pages
// of 16 tokens: sessions x and y hold 5 each; a call on y that may grow it
// to 120 tokens needs 4 more (one for copy-on-write) and 3 are free, while
// x, held here, cannot be evicted.
class EngineQueueTest : public EngineTest {
 protected:
  void SetUp() override {
    KVS_REQUIRE_SHARED_MODEL();
    idle_queue_grace_ = absl::Seconds(60);
    Start(/*max_batch_tokens=*/64, 1, 1, {}, /*pool_pages=*/13);
    x_ = env_->MakeSession(79);
    y_ = env_->MakeSession(79, 400);
    absl::StatusOr<std::shared_ptr<Session>> held = env_->sessions().Acquire(x_);
    ASSERT_TRUE(held.ok()) << held.status();
    held_ = *std::move(held);
  }
  void TearDown() override {
    // Let go before the pool goes: the session's KV is the pool's pages.
    if (held_) env_->sessions().Release(std::exchange(held_, nullptr));
    EngineTest::TearDown();
  }
  // A call on y that cannot start while x is held: 40 tokens.
  std::shared_ptr<RecordingListener> SubmitQueued(absl::Time deadline) {
    auto job = Submit(y_, {}, Greedy(40), 0, nullptr, deadline);
    EXPECT_TRUE(QueuedWithin(1, absl::Seconds(30))) << job->status;
    return job;
  }

  std::string x_, y_;
  std::shared_ptr<Session> held_;
};

// A held session keeps the pages a queued call needs; its release makes it
// evictable, which wakes the sleeping engine, and the call runs.
TEST_F(EngineQueueTest, ACallQueuedForKvMemoryRunsWhenAnotherSessionIsReleasedNotAtATimer) {
  auto job = SubmitQueued(absl::Now() + absl::Seconds(120));
  // Asleep: no step runs while nothing can (the loop used to run an empty
  // one every 5 ms while calls were queued).
  const size_t steps = Steps().size();
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(Steps().size(), steps) << "the engine polled";
  EXPECT_FALSE(job->done.HasBeenNotified()) << job->status;
  const absl::Time released = absl::Now();
  env_->sessions().Release(std::exchange(held_, nullptr));
  ASSERT_TRUE(job->done.WaitForNotificationWithTimeout(absl::Seconds(30)))
      << "the release did not wake the queue";
  ASSERT_TRUE(job->status.ok()) << job->status;
  EXPECT_EQ(job->ids.size(), 40u);
  EXPECT_LT(absl::Now() - released, absl::Seconds(30));
  EXPECT_FALSE(env_->sessions().Get(x_, false)->resident) << "x was evicted for it";
}

// A queued call cancelled with nothing running is answered at once, not
// when its deadline or the idle grace comes.
TEST_F(EngineQueueTest, ACallCancelledWhileQueuedIsAnsweredAtOnce) {
  auto job = SubmitQueued(absl::Now() + absl::Seconds(120));
  job->handle->Cancel();
  ASSERT_TRUE(job->done.WaitForNotificationWithTimeout(absl::Seconds(30)))
      << "the cancel did not wake the queue";
  EXPECT_TRUE(absl::IsCancelled(job->status)) << job->status;
  EXPECT_TRUE(job->ids.empty());
  EXPECT_EQ(env_->sessions().Get(y_, false)->length, 80) << "as it was";
}

// A queued call's deadline wakes the sleeping queue: refused when it
// passes, not before and not at the idle grace.
TEST_F(EngineQueueTest, AQueuedCallIsRefusedWhenItsDeadlinePassesWithNothingElseHappening) {
  const absl::Time submitted = absl::Now();
  auto job = Submit(y_, {}, Greedy(40), 0, nullptr, submitted + absl::Milliseconds(300));
  ASSERT_TRUE(job->done.WaitForNotificationWithTimeout(absl::Seconds(30)))
      << "the deadline did not wake the queue";
  EXPECT_GE(absl::Now() - submitted, absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsResourceExhausted(job->status)) << job->status;
  EXPECT_THAT(std::string(job->status.message()), ::testing::HasSubstr("before its deadline"));
}

TEST_F(EngineTest, ACachedPrefixIsAttachedInsteadOfComputed) {
  KVS_REQUIRE_SHARED_MODEL();
  Start(/*max_batch_tokens=*/64);
  const std::string first = env_->MakeSession(40, 60);
  (void)first;
  const std::string second = env_->MakeSession(0);
  std::vector<int32_t> same;
  for (int i = 0; i < 40; ++i) same.push_back(60 + i);
  auto job = Submit(second, same, std::nullopt);
  job->done.WaitForNotification();
  ASSERT_TRUE(job->status.ok());
  // BOS + the same 40 tokens: the first two full pages (32 positions) are cached.
  EXPECT_EQ(job->usage.cached_tokens, 32);
  int computed = 0;
  for (const StepReport& r : Steps()) computed += r.prefill_tokens;
  EXPECT_EQ(computed, 40 - 32);
}

TEST_F(EngineTest, InterleavedForksOfTwoPromptsEachGenerateWhatTheirPromptGeneratesAlone) {
  KVS_REQUIRE_SHARED_MODEL();
  Start(/*max_batch_tokens=*/64);
  const std::string a = env_->MakeSession(40, 10);
  const std::string b = env_->MakeSession(23, 301);
  auto a_forks = env_->sessions().Fork(a, 3, {}, {});
  auto b_forks = env_->sessions().Fork(b, 3, {}, {});
  ASSERT_TRUE(a_forks.ok()) << a_forks.status();
  ASSERT_TRUE(b_forks.ok()) << b_forks.status();
  // Submitted a, b, a, b, a, b: the engine groups each prompt's forks in a
  // step's batch (decode_row_order.h); every fork must still stream its
  // own tokens, in its own order.
  absl::Notification all_submitted;
  std::vector<std::shared_ptr<RecordingListener>> jobs;
  for (int i = 0; i < 3; ++i) {
    jobs.push_back(Submit((*a_forks)[i]->id, {}, Greedy(12), 0, i == 0 ? &all_submitted : nullptr));
    jobs.push_back(Submit((*b_forks)[i]->id, {}, Greedy(12)));
  }
  all_submitted.Notify();
  ASSERT_NO_FATAL_FAILURE(WaitForAll(jobs));
  EXPECT_GT(StepsDecoding(6), 0) << "the six forks never decoded in one step";

  // Each prompt alone, afterwards.
  auto a_alone = Submit(a, {}, Greedy(12));
  a_alone->done.WaitForNotification();
  auto b_alone = Submit(b, {}, Greedy(12));
  b_alone->done.WaitForNotification();
  ASSERT_EQ(a_alone->ids.size(), 12u);
  ASSERT_NE(a_alone->ids, b_alone->ids) << "the prompts must continue differently for this test to see a mix-up";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(jobs[2 * i]->ids, a_alone->ids) << "fork " << i << " of a";
    EXPECT_EQ(jobs[2 * i + 1]->ids, b_alone->ids) << "fork " << i << " of b";
  }
}

TEST_F(EngineTest, ForksSampledTogetherOnTwoThreadsDrawWhatEachDrawsAlone) {
  KVS_REQUIRE_SHARED_MODEL();
  Start(/*max_batch_tokens=*/64, /*threads=*/2);
  const std::string prompt = env_->MakeSession(40, 10);
  auto together = env_->sessions().Fork(prompt, 4, {}, {});
  auto alone = env_->sessions().Fork(prompt, 4, {}, {});
  ASSERT_TRUE(together.ok()) << together.status();
  ASSERT_TRUE(alone.ok()) << alone.status();
  // Each fork its own seed and parameters: top-k off with top-p (the
  // radix-sorted path), the defaults (top-k 40), top-k off with min-p and
  // a repetition penalty, and greedy; two of them with logprobs, which
  // are worked out in the same lanes.
  auto sampled = [](int i) {
    GenerateOptions g;
    g.max_tokens = 16;
    g.ignore_eos = true;
    g.reseed = true;
    g.sampling.seed = 1000 + i;
    g.sampling.temperature = 1.0f;
    g.top_logprobs = i == 1 || i == 3 ? 3 : 0;
    if (i == 0) {
      g.sampling.top_k = 0;
      g.sampling.top_p = 0.9f;
    } else if (i == 2) {
      g.sampling.top_k = 0;
      g.sampling.min_p = 0.02f;
      g.sampling.repetition_penalty = 1.3f;
    } else if (i == 3) {
      g.sampling.temperature = 0;
    }
    return g;
  };
  absl::Notification all_submitted;
  std::vector<std::shared_ptr<RecordingListener>> jobs;
  for (int i = 0; i < 4; ++i) {
    jobs.push_back(Submit((*together)[i]->id, {}, sampled(i), 0, i == 0 ? &all_submitted : nullptr));
  }
  all_submitted.Notify();
  ASSERT_NO_FATAL_FAILURE(WaitForAll(jobs));
  EXPECT_GT(StepsDecoding(4), 0) << "the four forks never decoded in one step";
  ASSERT_NE(jobs[0]->ids, jobs[1]->ids) << "the forks must draw differently for this test to see a mix-up";
  ASSERT_NE(jobs[1]->ids, jobs[2]->ids) << "the forks must draw differently for this test to see a mix-up";

  for (int i = 0; i < 4; ++i) {
    auto job = Submit((*alone)[i]->id, {}, sampled(i));
    job->done.WaitForNotification();
    ASSERT_TRUE(job->status.ok()) << job->status;
    EXPECT_EQ(jobs[i]->ids, job->ids) << "fork " << i;
    EXPECT_EQ(jobs[i]->logprobs, job->logprobs) << "fork " << i;
  }
  EXPECT_EQ(jobs[1]->logprobs.size(), 16u * 7) << "a logprob and 3 top pairs per token";
  EXPECT_TRUE(jobs[0]->logprobs.empty());
}

// More generating calls than a step has rows (here 4, the token budget):
// the rows go round, so every call streams before any of them ends (was:
// the first four in admission order took every row until they ended).
TEST_F(EngineTest, WhenMoreCallsGenerateThanAStepHasRowsEachGetsItsTurn) {
  KVS_REQUIRE_SHARED_MODEL();
  Start(/*max_batch_tokens=*/4);
  constexpr int kJobs = 6;
  constexpr int kTokens = 24;
  std::vector<std::string> ids;
  for (int i = 0; i < kJobs; ++i) ids.push_back(env_->MakeSession(8, 10 + 7 * i));
  // Tokens streamed per call, and the fewest any call had when the first
  // one ended: written on the engine thread only, read once every call
  // has ended (shared, so a failed wait leaves the callbacks valid memory).
  struct Counts {
    std::array<int, kJobs> streamed{};
    int fewest_at_first_end = -1;
  };
  auto counts = std::make_shared<Counts>();
  std::vector<std::shared_ptr<RecordingListener>> jobs;
  absl::Notification all_submitted;  // the first call waits at its first token for the others
  for (int i = 0; i < kJobs; ++i) {
    jobs.push_back(Submit(ids[i], {}, Greedy(kTokens), 0, i == 0 ? &all_submitted : nullptr,
                          absl::InfiniteFuture(), [counts, i](int n) {
                            counts->streamed[i] = n;
                            if (n == kTokens && counts->fewest_at_first_end < 0) {
                              counts->fewest_at_first_end =
                                  *std::min_element(counts->streamed.begin(), counts->streamed.end());
                            }
                          }));
  }
  all_submitted.Notify();
  for (const auto& job : jobs) job->done.WaitForNotification();
  WaitForAll(jobs);
  EXPECT_GT(counts->fewest_at_first_end, 0) << "a call had not streamed a token when the first one ended";
}

}  // namespace
}  // namespace kvs
