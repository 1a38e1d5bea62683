#include "service/engine.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "model/tokenizer.h"
#include "service/stop_matcher.h"

namespace kvs {
namespace {

// Decode rows per step (bounds the logits buffer: rows x vocab floats).
constexpr int kMaxDecodeRows = 128;
constexpr int kMaxTopLogprobs = 20;
constexpr int kMaxStopStrings = 8;
constexpr int kMaxStopBytes = 256;

}  // namespace

struct Engine::Job {
  std::shared_ptr<Session> session;
  std::vector<int32_t> input;
  std::optional<GenerateOptions> gen;
  std::shared_ptr<JobListener> listener;
  std::shared_ptr<JobHandle> handle;
  JobUsage usage;
  Utf8StreamDecoder decoder;
  std::unique_ptr<StopMatcher> stop;
  bool admitted = false;
};

Engine::Engine(const Model& model, SessionManager* sessions, TaskExecutor* io,
               const EngineOptions& options)
    : model_(model),
      sessions_(sessions),
      io_(io),
      options_(options),
      threads_(options.threads),
      transformer_(model.config(), model.weights(), &threads_, options.max_batch_tokens,
                   sessions->limits().max_context, options.matmul),
      sampler_(model.config().vocab_size),
      logits_(static_cast<size_t>(std::min(kMaxDecodeRows, options.max_batch_tokens)) *
              model.config().vocab_size) {
  loop_ = std::thread([this] { Loop(); });
}

Engine::~Engine() { Stop(); }

absl::Status Engine::Validate(const Session& session, std::span<const int32_t> input,
                              const std::optional<GenerateOptions>& generate) const {
  const int vocab = model_.config().vocab_size;
  for (int32_t id : input) {
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside the vocabulary [0, ", vocab, ")"));
    }
  }
  const int64_t total = static_cast<int64_t>(session.tokens.size()) + static_cast<int64_t>(input.size());
  const int max_context = sessions_->limits().max_context;
  if (total > max_context) {
    return absl::OutOfRangeError(absl::StrCat("the session would hold ", total,
                                              " tokens; the context limit is ", max_context,
                                              " tokens per session"));
  }
  if (!generate) return absl::OkStatus();
  if (total == 0) {
    return absl::FailedPreconditionError(
        "the session is empty: give input to generate from (this vocabulary has no BOS token)");
  }
  if (total >= max_context) {
    return absl::OutOfRangeError(absl::StrCat("no room to generate: the session holds ", total,
                                              " tokens, the context limit is ", max_context));
  }
  const int limit = sessions_->limits().max_tokens_per_generate;
  if (generate->max_tokens < 1 || generate->max_tokens > limit) {
    return absl::InvalidArgumentError(absl::StrCat("max_tokens must be in [1, ", limit, "], got ",
                                                   generate->max_tokens));
  }
  if (absl::Status s = generate->sampling.Validate(); !s.ok()) return s;
  if (generate->top_logprobs < 0 || generate->top_logprobs > kMaxTopLogprobs) {
    return absl::InvalidArgumentError(absl::StrCat("top_logprobs must be in [0, ", kMaxTopLogprobs,
                                                   "], got ", generate->top_logprobs));
  }
  if (generate->stop.size() > static_cast<size_t>(kMaxStopStrings)) {
    return absl::InvalidArgumentError(absl::StrCat("at most ", kMaxStopStrings,
                                                   " stop strings, got ", generate->stop.size()));
  }
  for (const std::string& s : generate->stop) {
    if (s.empty() || s.size() > static_cast<size_t>(kMaxStopBytes) || !IsValidUtf8(s)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stop strings must be non-empty valid UTF-8 of at most ", kMaxStopBytes, " bytes"));
    }
  }
  return absl::OkStatus();
}

std::shared_ptr<JobHandle> Engine::Submit(std::shared_ptr<Session> session,
                                          std::vector<int32_t> input, int prompt_tokens,
                                          std::optional<GenerateOptions> generate,
                                          std::shared_ptr<JobListener> listener) {
  auto job = std::make_unique<Job>();
  job->session = std::move(session);
  job->input = std::move(input);
  job->gen = std::move(generate);
  job->listener = std::move(listener);
  job->handle = std::make_shared<JobHandle>();
  job->usage.prompt_tokens = prompt_tokens;
  job->stop = std::make_unique<StopMatcher>(job->gen ? job->gen->stop : std::vector<std::string>());
  std::shared_ptr<JobHandle> handle = job->handle;
  in_flight_.fetch_add(1);
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    // The step loop is gone: end the job here (nothing ran; persist as is).
    Finish(std::move(job), absl::UnavailableError("the server is shutting down"),
           FinishReason::kError);
    return handle;
  }
  handles_.push_back(handle);
  incoming_.push_back(std::move(job));
  return handle;
}

bool Engine::WaitIdle(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (in_flight_.load() > 0) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

void Engine::CancelAll() {
  absl::MutexLock lock(&mu_);
  for (const auto& h : handles_) h->Cancel();
}

void Engine::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && !loop_.joinable()) return;
    stopping_ = true;
    for (const auto& h : handles_) h->Cancel();
  }
  if (loop_.joinable()) loop_.join();
  // Wait for the last persists (they run on the executor).
  WaitIdle(std::chrono::hours(1));
}

EngineStats Engine::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void Engine::Loop() {
  std::vector<std::unique_ptr<Job>> active;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (active.empty()) {
        mu_.Await(absl::Condition(
            +[](Engine* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) {
              return e->stopping_ || !e->incoming_.empty();
            },
            this));
      }
      for (auto& j : incoming_) active.push_back(std::move(j));
      incoming_.clear();
      // Forget handles of jobs that are gone.
      handles_.erase(std::remove_if(handles_.begin(), handles_.end(),
                                    [](const auto& h) { return h.use_count() == 1; }),
                     handles_.end());
      stats_.active_jobs = static_cast<int>(active.size());
      if (stopping_ && active.empty()) return;
    }
    for (auto& job : active) {
      if (job->admitted) continue;
      job->admitted = true;
      // Room for everything this job may add, so appending a generated
      // token never reallocates in the step loop.
      const size_t more = job->input.size() + (job->gen ? job->gen->max_tokens : 0);
      sessions_->ReserveTokens(*job->session, more);
      job->session->kv->ReserveTable(static_cast<int>(job->session->tokens.size() + more));
      sessions_->AppendTokens(*job->session, job->input);
      if (job->gen && job->gen->reseed) job->session->rng = SequenceRng(job->gen->sampling.seed);
    }
    Step(active);
  }
}

void Engine::Finish(std::unique_ptr<Job> job, absl::Status status, FinishReason reason) {
  std::string final_text;
  if (job->gen && !job->stop->stopped()) {
    final_text = job->stop->Push(job->decoder.Finish());
    final_text += job->stop->Finish();
  }
  job->usage.session_tokens = static_cast<int>(job->session->tokens.size());
  std::shared_ptr<Job> shared(std::move(job));
  io_->Submit([this, shared, status, reason, final_text] {
    absl::Status st = status;
    absl::Status persisted = sessions_->PersistAndRelease(shared->session);
    if (!persisted.ok() && st.ok()) {
      st = absl::UnavailableError(absl::StrCat("the session could not be persisted: ",
                                               persisted.message()));
    }
    shared->listener->OnDone(st, st.ok() || reason == FinishReason::kCancelled ? reason : FinishReason::kError,
                             shared->usage, final_text);
    in_flight_.fetch_sub(1);
  });
}

void Engine::HandleToken(Job& job, const float* logits, bool* finished, FinishReason* reason) {
  Session& s = *job.session;
  const GenerateOptions& g = *job.gen;
  const Tokenizer& tok = model_.tokenizer();
  std::span<const float> l(logits, model_.config().vocab_size);
  GeneratedToken t;
  t.id = sampler_.Sample(g.sampling, l, s.tokens, &s.rng);
  if (g.top_logprobs > 0) {
    t.logprob = Sampler::Logprob(l, t.id);
    sampler_.TopLogprobs(l, g.top_logprobs, &t.top);
  }
  sessions_->AppendTokens(s, {&t.id, 1});
  ++job.usage.generated_tokens;
  const bool eog = !g.ignore_eos && tok.IsEndOfGeneration(t.id);
  std::string text = eog ? std::string() : job.stop->Push(job.decoder.Push(tok.Piece(t.id)));
  job.listener->OnToken(t, text);
  *finished = true;
  if (eog) {
    *reason = FinishReason::kStopToken;
  } else if (job.stop->stopped()) {
    *reason = FinishReason::kStopSequence;
  } else if (job.usage.generated_tokens >= g.max_tokens ||
             static_cast<int>(s.tokens.size()) >= sessions_->limits().max_context) {
    *reason = FinishReason::kLength;
  } else {
    *finished = false;
  }
}

void Engine::Step(std::vector<std::unique_ptr<Job>>& active) {
  // Cancelled jobs end here: whatever they produced stays in the session.
  for (auto& job : active) {
    if (job && job->handle->cancelled()) {
      Finish(std::move(job), absl::CancelledError("the call was cancelled"), FinishReason::kCancelled);
    }
  }
  active.erase(std::remove(active.begin(), active.end(), nullptr), active.end());

  // Plan the batch: decode tokens first, then prefill chunks.
  std::vector<Planned>& plan = plan_;
  plan.clear();
  int budget = options_.max_batch_tokens;
  int decode_rows = 0;
  for (auto& job : active) {
    Session& s = *job->session;
    const int target = static_cast<int>(s.tokens.size()) - 1;
    if (job->gen && s.kv->length() == target && decode_rows < kMaxDecodeRows && budget > 0) {
      plan.push_back({job.get(), true, 1});
      ++decode_rows;
      --budget;
    }
  }
  int64_t cached = 0;
  for (auto& job : active) {
    Session& s = *job->session;
    const int target = std::max(0, static_cast<int>(s.tokens.size()) - 1);
    int lag = target - s.kv->length();
    if (lag <= 0) continue;
    const int hit = sessions_->AttachCachedPrefix(s, lag);
    job->usage.cached_tokens += hit;
    cached += hit;
    lag -= hit;
    const int n = std::min(lag, budget);
    if (n <= 0) continue;
    plan.push_back({job.get(), false, n});
    budget -= n;
  }

  // Reserve KV space; under memory pressure evict idle sessions' KV first.
  std::vector<ForwardItem>& items = items_;
  std::vector<Planned>& ran = ran_;
  items.clear();
  ran.clear();
  for (const Planned& p : plan) {
    Session& s = *p.job->session;
    absl::Status st = s.kv->PrepareAppend(p.n_tokens);
    if (!st.ok() && absl::IsResourceExhausted(st)) {
      const int t = s.kv->geometry().page_tokens;
      if (sessions_->EvictIdle(p.n_tokens / t + 2)) st = s.kv->PrepareAppend(p.n_tokens);
    }
    if (!st.ok()) {
      for (auto& job : active) {
        if (job.get() == p.job) Finish(std::move(job), st, FinishReason::kError);
      }
      continue;
    }
    const int start = s.kv->length();
    items.push_back({&*s.kv, std::span<const int32_t>(s.tokens).subspan(start, p.n_tokens),
                     p.decode ? Logits::kLast : Logits::kNone});
    ran.push_back(p);
  }

  if (!items.empty()) {
    absl::Status st = transformer_.Forward(items, logits_.data());
    int row = 0;
    for (const Planned& p : ran) {
      auto it = std::find_if(active.begin(), active.end(), [&](const auto& j) { return j.get() == p.job; });
      if (!st.ok()) {
        Finish(std::move(*it), st, FinishReason::kError);
        continue;
      }
      sessions_->RegisterFullPages(*p.job->session);
      if (!p.decode) continue;
      bool finished = false;
      FinishReason reason = FinishReason::kNone;
      HandleToken(*p.job, logits_.data() + static_cast<size_t>(row) * model_.config().vocab_size,
                  &finished, &reason);
      ++row;
      if (finished) Finish(std::move(*it), absl::OkStatus(), reason);
    }
  }
  active.erase(std::remove(active.begin(), active.end(), nullptr), active.end());

  // Appends whose KV caught up are done.
  for (auto& job : active) {
    Session& s = *job->session;
    if (!job->gen && s.kv->length() >= static_cast<int>(s.tokens.size()) - 1) {
      Finish(std::move(job), absl::OkStatus(), FinishReason::kNone);
    }
  }
  active.erase(std::remove(active.begin(), active.end(), nullptr), active.end());

  absl::MutexLock lock(&mu_);
  ++stats_.steps;
  stats_.cached_tokens += cached;
  for (const Planned& p : ran) (p.decode ? stats_.decode_tokens : stats_.prefill_tokens) += p.n_tokens;
}

}  // namespace kvs
