// Engine: the one scheduler that runs every session's prefill and decode.
//
// A job (an Append, or a Generate with optional input) holds an acquired
// session. The engine's step loop builds one batch per step from every
// active job, under a token budget:
//   - one decode token for each job that is generating (decode first, for
//     latency), then
//   - prefill chunks for jobs whose KV lags their tokens (after taking
//     whole pages from the prefix cache where the same prefix was computed
//     before),
// runs one Forward for the whole batch (one pass over the weights however
// many sessions; this is what makes N forks cost far less than N sessions),
// then samples each generating job's next token with its own parameters
// and random generator, and streams it out at once.
//
// A job ends with a finish reason (end-of-generation token, stop string,
// length, cancellation, error); the session keeps every token generated,
// is persisted, released, and only then is the listener told (so an
// acknowledged result is durable). Cancellation is seen within one step.
//
// Threads: the step loop runs on the engine's own thread and drives the
// forward pass's thread pool; listeners' OnChunk runs on that thread and
// must not block; persistence and OnDone run on the TaskExecutor.
#ifndef KVSESSION_SERVICE_ENGINE_H_
#define KVSESSION_SERVICE_ENGINE_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/thread_pool.h"
#include "model/transformer.h"
#include "service/session_manager.h"
#include "service/task_executor.h"

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
};

enum class FinishReason { kNone, kStopToken, kStopSequence, kLength, kCancelled, kError };

struct GeneratedToken {
  int32_t id = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // when top_logprobs > 0
};

struct JobUsage {
  int prompt_tokens = 0;
  int cached_tokens = 0;
  int generated_tokens = 0;
  int session_tokens = 0;
};

class JobListener {
 public:
  virtual ~JobListener() = default;
  // A generated token and the text it completes (may be empty), in order.
  virtual void OnToken(const GeneratedToken& token, const std::string& text) = 0;
  // Exactly once, after the session is persisted and released.
  virtual void OnDone(const absl::Status& status, FinishReason reason, const JobUsage& usage,
                      const std::string& final_text) = 0;
};

// A submitted job, for cancellation.
class JobHandle {
 public:
  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> cancelled_{false};
};

struct EngineOptions {
  int threads = 0;  // 0: one per core
  int max_batch_tokens = 512;
  MatmulPath matmul = MatmulPath::kFast;
};

struct EngineStats {
  int64_t steps = 0;
  int64_t prefill_tokens = 0;
  int64_t decode_tokens = 0;
  int64_t cached_tokens = 0;
  int active_jobs = 0;
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
  std::shared_ptr<JobHandle> Submit(std::shared_ptr<Session> session, std::vector<int32_t> input,
                                    int prompt_tokens, std::optional<GenerateOptions> generate,
                                    std::shared_ptr<JobListener> listener);

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

  void Loop();
  void Step(std::vector<std::unique_ptr<Job>>& active);
  void Finish(std::unique_ptr<Job> job, absl::Status status, FinishReason reason);
  void HandleToken(Job& job, const float* logits, bool* finished, FinishReason* reason);

  const Model& model_;
  SessionManager* const sessions_;
  TaskExecutor* const io_;
  const EngineOptions options_;
  ThreadPool threads_;
  Transformer transformer_;
  Sampler sampler_;
  std::vector<float> logits_;
  // Per-step work lists, kept to reuse their capacity (a step allocates nothing).
  std::vector<Planned> plan_;
  std::vector<Planned> ran_;
  std::vector<ForwardItem> items_;

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
