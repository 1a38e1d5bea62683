// Engine: the one scheduler that runs every session's prefill and decode.
//
// A job (an Append, or a Generate with optional input) holds an acquired
// session and a SessionKv handle on its KV. The engine's step loop runs
// one Step per iteration over every active job, in phases:
//   1. reap      jobs whose call was cancelled end (as cancelled);
//   2. plan      under the --max-batch-tokens budget: one decode token for
//                each generating job first (latency), then prefill chunks
//                for jobs whose KV lags their tokens, after taking whole
//                pages from the prefix cache; decode rows of sessions that
//                share their first KV page (forks) are put side by side
//                (decode_row_order.h), so attention reads those pages once;
//   3. reserve   KV space for every planned row (evicting idle sessions'
//                KV under pressure); a job that gets none ends with
//                RESOURCE_EXHAUSTED;
//   4. forward   one Transformer::Forward for the whole batch (one pass over
//                the weights however many sessions: what makes N forks cost
//                far less than N sessions);
//   5. deliver   key newly full pages (a prefill's are also staged: written
//                to the store while the job computes on, page_staging.h);
//                each generating job samples its
//                next token with its own parameters and random generator
//                (the step's draws, and their logprobs when asked for, run
//                side by side on the thread pool, one Sampler per lane:
//                each draw reads only its job's logits, tokens and
//                generator, so the tokens are the same as drawn one by
//                one), then, in batch order, appends and streams it
//                (TokenStream decides text and the end);
//   6. finish    Appends whose KV caught up are done.
//
// Context policy (context_policy.h): an ERROR job is refused (OUT_OF_RANGE)
// if its input does not fit and ends with LENGTH at the context limit; a
// SLIDE job, when its KV is full and it needs another position, slides
// first (SessionKv::Slide: drops half the pages after the kept ones) and
// goes on, so it never ends for the context.
//
// A job ends with a finish reason (end-of-generation token, stop string,
// length, cancellation, error); the session keeps every token generated,
// is persisted, released, and only then is the listener told (so an
// acknowledged result is durable). Cancellation is seen within one step.
//
// Threads: the step loop runs on the engine's own thread ("kvs-engine")
// and drives the forward pass's thread pool, computing as its thread 0; listeners' OnToken runs on that thread and
// must not block; persistence and OnDone run on the TaskExecutor.
#ifndef KVSESSION_SERVICE_ENGINE_H_
#define KVSESSION_SERVICE_ENGINE_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "model/key_rotation.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/thread_pool.h"
#include "model/token_stream.h"
#include "model/transformer.h"
#include "service/chat_state.h"
#include "service/context_policy.h"
#include "service/job_handle.h"
#include "service/page_staging.h"
#include "service/session_manager.h"
#include "service/task_executor.h"
#include "service/wake_signal.h"

namespace kvs {

struct GenerateOptions {
  int max_tokens = 128;
  SamplingParams sampling;
  // Restart the session's random stream from sampling.seed (the request set
  // a seed); otherwise continue the session's stream.
  bool reseed = false;
  std::vector<std::string> stop;
  int top_logprobs = 0;
  bool ignore_eos = false;
  // This call's context policy (unset: the session's).
  std::optional<ContextPolicy> context_policy;
};

// A candidate token with its log-probability and text piece.
struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
  std::string piece;
};

struct GeneratedToken {
  int32_t id = 0;
  // Only when the request asked for top_logprobs > 0:
  float logprob = 0;
  std::string piece;
  std::vector<TokenLogprob> top;
};

struct JobUsage {
  int prompt_tokens = 0;
  int cached_tokens = 0;
  int generated_tokens = 0;
  int session_tokens = 0;
  int tokens_dropped = 0;  // by slides (SLIDE)
};

class JobListener {
 public:
  virtual ~JobListener() = default;
  // A generated token and the text it completes (may be empty), in order.
  virtual void OnToken(const GeneratedToken& token, const std::string& text) = 0;
  // Exactly once, after the session is persisted and released; `session`
  // is the session as released (the call's own result, whatever later
  // calls do to it).
  virtual void OnDone(const absl::Status& status, FinishReason reason, const JobUsage& usage,
                      const std::string& final_text, const SessionInfo& session) = 0;
};

// What one step ran (EngineOptions::step_observer).
struct StepReport {
  int decode_rows = 0;      // generating jobs that got a token this step
  int prefill_chunks = 0;   // jobs that prefilled this step
  int prefill_tokens = 0;   // their tokens
  int cached_tokens = 0;    // tokens taken from the prefix cache this step
  int finished_jobs = 0;    // jobs that ended this step (any reason)
};

struct EngineOptions {
  int threads = 0;  // 0: one per core
  int max_batch_tokens = 512;
  MatmulPath matmul = MatmulPath::kFast;
  // Jobs that wait for KV room before they start (beyond: RESOURCE_EXHAUSTED).
  int max_queued_jobs = 64;
  // With no job running, the head of the queue is refused after waiting
  // this long without finding room, and then at most one job per this long
  // (see Submit). Tests lengthen it to see a queue that is only woken.
  absl::Duration idle_queue_grace = absl::Seconds(1);
  // Called on the engine thread after every step, before the jobs that
  // ended in it are persisted and answered (tests, metrics); must not block.
  std::function<void(const StepReport&)> step_observer;
};

struct EngineStats {
  int64_t steps = 0;
  int64_t prefill_tokens = 0;
  int64_t decode_tokens = 0;
  int64_t cached_tokens = 0;
  int active_jobs = 0;
  int queued_jobs = 0;  // submitted, waiting for KV room to be admitted
};

class Engine {
 public:
  Engine(const Model& model, SessionManager* sessions, TaskExecutor* io, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Checks a job before it is submitted: input ids in the vocabulary, the
  // context limit, generate options. `session` must be acquired.
  absl::Status Validate(const Session& session, std::span<const int32_t> input,
                        const std::optional<GenerateOptions>& generate) const;

  // Takes over an acquired, validated session: appends `input` to it,
  // prefills, and generates when `generate` is set. `prompt_tokens` is what
  // usage reports as the call's prompt (input plus a new session's BOS).
  // `handle` cancels the job; the caller creates it and attaches it to
  // whatever may cancel (a call's reactor) before submitting, since the job
  // may finish before Submit returns.
  //
  // Admission: a job starts only when the KV pool can hold everything it
  // may still write (its input and max_tokens) on top of what the running
  // jobs may still write, after evicting idle sessions; so no running
  // stream fails for KV memory. Until then it waits in a queue of at most
  // max_queued_jobs, up to `deadline`; then, or when the queue is full or
  // the job could never fit, it ends with RESOURCE_EXHAUSTED before its
  // first token. So does the head of the queue when no job is running and
  // it has found no room for a second (the waiting jobs' own sessions hold
  // the pages; one such refusal a second, so the next gets the room).
  // Queued jobs are looked at again after each step, when room is given
  // back in the pool (a page freed, a session become idle and clean), when
  // one is cancelled, and when a deadline or the idle grace falls due; the
  // engine does not poll.
  //
  // `chat` (service/chat_state.h), for a session that is or becomes a
  // chat: its ChatState is set to chat->after_input when the input is
  // appended; if generation then ends on one of chat->end_of_turn_ids, the
  // tokens of chat->after_end_of_turn follow it (without KV: the next job
  // prefills them) and the turn is closed, in the same persisted state.
  void Submit(std::shared_ptr<Session> session, std::vector<int32_t> input, int prompt_tokens,
              std::optional<GenerateOptions> generate, std::shared_ptr<JobListener> listener,
              std::shared_ptr<JobHandle> handle, absl::Time deadline = absl::InfiniteFuture(),
              std::optional<ChatJob> chat = std::nullopt);

  // Cancels every job (shutdown); they finish as cancelled and persist.
  void CancelAll();
  // Waits until no job is running or persisting (or `timeout` passes).
  bool WaitIdle(std::chrono::milliseconds timeout);
  // Stops the step loop after cancelling every job and waiting for them.
  // Jobs submitted afterwards end at once with UNAVAILABLE.
  void Stop();

  EngineStats Stats() const;
  int threads() const { return threads_.size(); }
  const Transformer& transformer() const { return transformer_; }

 private:
  struct Job;
  // One job's share of a step: a decode token or a prefill chunk.
  struct Planned {
    Job* job;
    bool decode;
    int n_tokens;
  };
  using Active = std::vector<std::unique_ptr<Job>>;

  void Loop();
  // Moves submitted jobs into the admission queue and admits what fits
  // into `active`, sleeping (wake_) while nothing runs; returns true with
  // at least one job active, false to stop.
  bool TakeIncoming(Active& active);
  // When a queued call must next be looked at with nothing else happening:
  // the earliest deadline, or the head's idle grace (engine thread).
  absl::Time NextQueueCheck() const;
  // Admits queued jobs, in order, while the pool has room for them.
  void AdmitWaiting(Active& active);
  void Admit(Job& job);
  // KV pages `job` may still need (its whole remaining growth, plus one
  // copy-on-write page).
  int64_t PagesStillNeeded(const Job& job) const;
  void Step(Active& active);
  // The phases of Step, in order (see the header comment).
  void ReapCancelled(Active& active, StepReport& report);
  // SLIDE jobs whose KV is full and that need another position slide
  // (SessionKv::Slide); a failed slide ends the job with its error. The
  // pages a slide frees stay set aside for the job to grow back into.
  void SlideFullJobs(Active& active, StepReport& report);
  // Sets aside in the pool what the running jobs may still need
  // (PagesStillNeeded), so loads by other calls cannot take it.
  void ReserveForRunningJobs(const Active& active);
  void Plan(const Active& active, StepReport& report);
  void Reserve(Active& active, StepReport& report);
  absl::Status RunForward();
  void Deliver(Active& active, const absl::Status& forward, StepReport& report);
  // Stages the pages [first, ...) a prefill chunk of `job` just filled
  // (page_staging.h), so that its final persist has less left to write.
  void StagePrefillPages(Job& job, int first);
  void FinishCaughtUpAppends(Active& active, StepReport& report);
  void RecordStep(const StepReport& report);

  // Persists and releases the job's session, then tells its listener, on
  // the executor.
  void Finish(std::unique_ptr<Job> job, absl::Status status, FinishReason reason);
  // A chat job whose generation ended on an end-of-turn token: appends the
  // template's text after it and closes the turn (see Submit).
  void CloseChatTurn(Job& job, FinishReason reason);
  // Moves `job` out of `active` (its slot becomes null) to end after the step.
  void EndJob(Active& active, Job* job, absl::Status status, FinishReason reason,
              StepReport& report);
  // A decode row of the step: its job, its logits, the token drawn and,
  // when the job asks for logprobs, the token's and the top_count most
  // likely tokens' (at `top`, room for kMaxTopLogprobs).
  struct Draw {
    Job* job;
    const float* logits;
    std::pair<int32_t, float>* top;
    int32_t id = 0;
    float logprob = 0;
    int top_count = 0;
  };
  // Draws every row of draws_ (and its logprobs), across the pool's
  // threads when there are several rows.
  void DrawTokens();
  // Appends and streams a generating job's drawn token (with its
  // logprobs when asked for).
  void DeliverToken(Job& job, const Draw& draw);

  const Model& model_;
  SessionManager* const sessions_;
  TaskExecutor* const io_;
  const EngineOptions options_;
  ThreadPool threads_;
  Transformer transformer_;
  KeyRotation rotation_;  // SLIDE's key rotation for this model
  // One per sampling lane (kMaxSamplingLanes at most, no more than the
  // pool's threads): each holds a vocabulary's scratch, a few MB.
  std::vector<Sampler> samplers_;
  // [min(kMaxDecodeRows, max_batch_tokens)][vocab] logits of one step's
  // rows. Left uninitialised (the forward pass writes each row it reads):
  // 128 rows of a 152k vocabulary are 78 MB that the memory holds only
  // once that many rows decode together, not from start-up on.
  std::unique_ptr<float[]> logits_;
  // Per-step work lists, kept to reuse their capacity (a step allocates nothing).
  std::vector<Planned> plan_;
  // Plan's round robin (engine thread only): jobs are numbered as they
  // are admitted; the last step's last decode row and prefill chunk went
  // to these, and the next step starts after them.
  uint64_t admissions_ = 0;
  uint64_t decode_after_ = 0;
  uint64_t prefill_after_ = 0;
  std::vector<Planned> ran_;
  std::vector<ForwardItem> items_;
  std::vector<Draw> draws_;
  std::vector<std::pair<int32_t, float>> draw_tops_;  // kMaxTopLogprobs per decode row
  // Jobs that ended in the current step, finished after it is recorded.
  struct Ending {
    std::unique_ptr<Job> job;
    absl::Status status;
    FinishReason reason;
  };
  std::vector<Ending> ending_;
  std::deque<std::unique_ptr<Job>> waiting_;  // the admission queue (engine thread)
  absl::Time last_idle_refusal_ = absl::InfinitePast();  // AdmitWaiting (engine thread)
  const Active* current_active_ = nullptr;     // the step loop's (engine thread)

  // Wakes the loop while no job runs (TakeIncoming); shared with the jobs'
  // handles and the page pool's callback, which may outlive the engine.
  const std::shared_ptr<WakeSignal> wake_ = std::make_shared<WakeSignal>();
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Job>> incoming_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<JobHandle>> handles_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  EngineStats stats_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> in_flight_{0};  // submitted and not yet done (incl. persisting)
  std::thread loop_;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_ENGINE_H_
