#include "service/engine.h"

#include <pthread.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "model/kv_slide.h"
#include "service/decode_row_order.h"
#include "model/tokenizer.h"

namespace kvs {
namespace {

// Decode rows per step (bounds the logits buffer: rows x vocab floats).
constexpr int kMaxDecodeRows = 128;
// Samplers drawing a step's tokens side by side (each holds about 36 bytes
// per vocabulary entry: 5.5 MB at 151,936).
constexpr int kMaxSamplingLanes = 8;
constexpr int kMaxTopLogprobs = 20;
constexpr int kMaxStopStrings = 8;
constexpr int kMaxStopBytes = 256;

}  // namespace

struct Engine::Job {
  std::shared_ptr<Session> session;
  SessionKv kv;
  std::vector<int32_t> input;
  std::optional<GenerateOptions> gen;
  std::optional<TokenStream> stream;  // when generating
  std::shared_ptr<JobListener> listener;
  std::shared_ptr<JobHandle> handle;
  JobUsage usage;
  absl::Time deadline = absl::InfiniteFuture();
  absl::Time queued_at = absl::Now();  // when it was submitted
  bool admitted = false;
  uint64_t admission = 0;  // its place in admission order (Plan's round robin)
  std::optional<ChatJob> chat;
  bool slide = false;  // the call's context policy is SLIDE
  // Its prefill's full pages, written while it computes on (made at the
  // first page to stage).
  std::optional<PageStaging> staging;
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
      rotation_(model.config(), model.weights()),
      logits_(std::make_unique_for_overwrite<float[]>(
          static_cast<size_t>(std::min(kMaxDecodeRows, options.max_batch_tokens)) * model.config().vocab_size)) {
  const int lanes = std::min(threads_.size(), kMaxSamplingLanes);
  samplers_.reserve(lanes);
  for (int i = 0; i < lanes; ++i) samplers_.emplace_back(model.config().vocab_size);
  draws_.reserve(std::min(kMaxDecodeRows, options.max_batch_tokens));
  draw_tops_.resize(static_cast<size_t>(std::min(kMaxDecodeRows, options.max_batch_tokens)) * kMaxTopLogprobs);
  // Room given back in the pool (a page freed, the reserve shrunk, a
  // session become evictable) wakes the loop, for the calls queued for it.
  // The callback shares the signal, so it stays safe after the engine goes
  // (it is not removed: an engine made later on the same pool replaces it).
  sessions_->pool()->SetRoomGivenBackCallback([wake = wake_] { wake->Wake(); });
  loop_ = std::thread([this] { Loop(); });
}

Engine::~Engine() { Stop(); }

absl::Status Engine::Validate(const Session& session, std::span<const int32_t> input,
                              const std::optional<GenerateOptions>& generate) const {
  const int vocab = model_.config().vocab_size;
  // The idle invariant (session.h): the KV leaves the last token to feed.
  // A job on a session that breaks it, with no input to feed either, would
  // get no step and run to its deadline. (Input repairs it.)
  const int64_t fed_last = static_cast<int64_t>(session.tokens.size()) + static_cast<int64_t>(input.size()) - 1;
  if (session.kv_length() > std::max<int64_t>(0, fed_last)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the session's KV covers ", session.kv_length(), " positions of its ", session.tokens.size(),
        " tokens, leaving none to feed: give input, or Truncate it"));
  }
  for (int32_t id : input) {
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside the vocabulary [0, ", vocab, ")"));
    }
  }
  const int64_t total = static_cast<int64_t>(session.tokens.size()) + static_cast<int64_t>(input.size());
  const int max_context = sessions_->limits().max_context;
  const ContextPolicy policy = generate && generate->context_policy ? *generate->context_policy
                                                                    : session.context_policy;
  if (policy == ContextPolicy::kSlide) {
    // Past the context it slides: only the kept pages must leave room.
    if (total + (generate ? generate->max_tokens : 0) > max_context) {
      absl::StatusOr<SlidePlan> plan = PlanSlide(max_context, max_context, session.keep_tokens,
                                                 sessions_->pool()->geometry().page_tokens);
      if (!plan.ok()) return plan.status();
    }
  } else if (total > max_context) {
    return absl::OutOfRangeError(absl::StrCat("the session would hold ", total,
                                              " tokens; the context limit is ", max_context,
                                              " tokens per session"));
  }
  if (!generate) return absl::OkStatus();
  if (total == 0) {
    return absl::FailedPreconditionError(
        "the session is empty: give input to generate from (this vocabulary has no BOS token)");
  }
  if (total >= max_context && policy != ContextPolicy::kSlide) {
    return absl::OutOfRangeError(absl::StrCat("no room to generate: the session holds ", total,
                                              " tokens, the context limit is ", max_context));
  }
  const int limit = sessions_->limits().max_tokens_per_generate;
  if (generate->max_tokens < 1 || generate->max_tokens > limit) {
    return absl::InvalidArgumentError(absl::StrCat("max_tokens must be in [1, ", limit, "], got ",
                                                   generate->max_tokens));
  }
  if (absl::Status s = generate->sampling.ValidateFor(vocab); !s.ok()) return s;
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

void Engine::Submit(std::shared_ptr<Session> session, std::vector<int32_t> input,
                    int prompt_tokens, std::optional<GenerateOptions> generate,
                    std::shared_ptr<JobListener> listener, std::shared_ptr<JobHandle> handle,
                    absl::Time deadline, std::optional<ChatJob> chat) {
  SessionKv kv = sessions_->OpenKv(*session);
  auto job = std::unique_ptr<Job>(new Job{std::move(session), kv, std::move(input),
                                          std::move(generate), std::nullopt, std::move(listener),
                                          std::move(handle), {}, deadline, absl::Now(), false, 0, std::move(chat),
                                          false, std::nullopt});
  job->usage.prompt_tokens = prompt_tokens;
  job->slide = (job->gen && job->gen->context_policy ? *job->gen->context_policy
                                                     : job->session->context_policy) ==
               ContextPolicy::kSlide;
  if (job->gen) {
    // A sliding job never ends for the context.
    const int context = job->slide ? INT32_MAX : sessions_->limits().max_context;
    // A call that continues the session as it is (no input) completes a
    // character the last one left cut.
    std::string carry =
        job->input.empty() ? TrailingIncompleteCharacter(model_.tokenizer(), job->session->tokens) : std::string();
    job->stream.emplace(&model_.tokenizer(),
                        TokenStreamOptions{job->gen->max_tokens, context, job->gen->stop, job->gen->ignore_eos,
                                           std::move(carry)});
  }
  in_flight_.fetch_add(1);
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    // The step loop is gone: end the job here (nothing ran; persist as is).
    Finish(std::move(job), absl::UnavailableError("the server is shutting down"),
           FinishReason::kError);
    return;
  }
  job->handle->SetWaker(wake_);
  handles_.push_back(job->handle);
  incoming_.push_back(std::move(job));
  wake_->Wake();
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
  wake_->Wake();
  if (loop_.joinable()) loop_.join();
  // Wait for the last persists (they run on the executor).
  WaitIdle(std::chrono::hours(1));
}

EngineStats Engine::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void Engine::Loop() {
  pthread_setname_np(pthread_self(), "kvs-engine");  // top -H, perf
  Active active;
  while (TakeIncoming(active)) Step(active);
}

bool Engine::TakeIncoming(Active& active) {
  // Looks first (after a step: the jobs it ended gave their room back),
  // then, while no job runs, sleeps until something may change what can
  // run: new work or Stop, a queued call cancelled, room given back in the
  // pool, or the next time a queued call's deadline or the idle grace falls
  // due (NextQueueCheck). A wake that comes while it looks makes the next
  // sleep return at once (WakeSignal). No step runs without a job.
  for (bool look = true;; look = false) {
    if (!look) wake_->WaitAndClear(NextQueueCheck());
    std::vector<std::unique_ptr<Job>> refused;
    {
      absl::MutexLock lock(&mu_);
      for (auto& j : incoming_) {
        if (static_cast<int>(waiting_.size()) >= options_.max_queued_jobs) {
          refused.push_back(std::move(j));
        } else {
          waiting_.push_back(std::move(j));
        }
      }
      incoming_.clear();
      // Forget handles of jobs that are gone.
      handles_.erase(std::remove_if(handles_.begin(), handles_.end(),
                                    [](const auto& h) { return h.use_count() == 1; }),
                     handles_.end());
      if (stopping_) {
        for (auto& j : waiting_) j->handle->Cancel();
      }
    }
    for (auto& job : refused) {
      Finish(std::move(job),
             absl::ResourceExhaustedError(absl::StrCat(
                 "the server is at capacity: ", options_.max_queued_jobs,
                 " calls already wait for KV memory; retry later")),
             FinishReason::kError);
    }
    AdmitWaiting(active);
    absl::MutexLock lock(&mu_);
    stats_.active_jobs = static_cast<int>(active.size());
    stats_.queued_jobs = static_cast<int>(waiting_.size());
    if (!active.empty()) return true;
    if (stopping_ && waiting_.empty()) return false;
  }
}

absl::Time Engine::NextQueueCheck() const {
  if (waiting_.empty()) return absl::InfiniteFuture();
  absl::Time next = absl::InfiniteFuture();
  for (const auto& job : waiting_) next = std::min(next, job->deadline);
  // AdmitWaiting's idle refusal of the head, with no job running.
  return std::min(next, std::max(waiting_.front()->queued_at, last_idle_refusal_) + options_.idle_queue_grace);
}

int64_t Engine::PagesStillNeeded(const Job& job) const {
  const Session& s = *job.session;
  const int t = s.kv->geometry().page_tokens;
  int64_t final_tokens = static_cast<int64_t>(s.tokens.size());
  if (!job.admitted) final_tokens += static_cast<int64_t>(job.input.size());
  if (job.gen) final_tokens += job.gen->max_tokens - job.usage.generated_tokens;
  final_tokens = std::min<int64_t>(final_tokens, sessions_->limits().max_context);
  const int64_t pages = (final_tokens + t - 1) / t;
  // A slide copies the moved pages that other sequences share (forks);
  // pages this job writes are its own.
  int64_t slide_copies = 0;
  if (job.slide) {
    for (PageId p : s.kv->page_table()) slide_copies += sessions_->pool()->ref_count(p) > 1;
  }
  return std::max<int64_t>(0, pages - s.kv->num_pages()) + 1 + slide_copies;
}

void Engine::AdmitWaiting(Active& active) {
  const absl::Time now = absl::Now();
  // Cancelled or expired jobs leave the queue, in any position.
  for (auto& job : waiting_) {
    if (job->handle->cancelled()) {
      Finish(std::move(job), absl::CancelledError("the call was cancelled"), FinishReason::kCancelled);
    } else if (now >= job->deadline) {
      // The message reads the job: made before the job is moved into the
      // call (an argument's evaluation order is unspecified).
      absl::Status expired = absl::ResourceExhaustedError(absl::StrCat(
          "no KV memory for this call before its deadline: it needs ", PagesStillNeeded(*job),
          " pages and the running calls hold the rest of ", sessions_->pool()->max_pages(),
          " (--kv-cache-mb)"));
      Finish(std::move(job), std::move(expired), FinishReason::kError);
    }
  }
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), nullptr), waiting_.end());
  PagePool* pool = sessions_->pool();
  int64_t committed = 0;
  for (const auto& a : active) committed += PagesStillNeeded(*a);
  pool->SetReserved(committed);
  while (!waiting_.empty()) {
    Job& job = *waiting_.front();
    const int64_t need = PagesStillNeeded(job);
    const int64_t max_pages = pool->max_pages();
    if (committed + need > max_pages && active.empty()) {
      // It could never fit, even alone.
      auto refused = std::move(waiting_.front());
      waiting_.pop_front();
      Finish(std::move(refused),
             absl::ResourceExhaustedError(absl::StrCat(
                 "this call may need ", need, " KV pages; the pool has ", max_pages,
                 " (--kv-cache-mb)")),
             FinishReason::kError);
      continue;
    }
    if (!sessions_->MakeRoom(need)) {
      // Wait for running jobs to end. With none running, nothing that
      // waiting frees is coming: the pages are held by the waiting calls'
      // own sessions (loaded for them, so not evictable) or by sessions
      // that cannot be evicted. After a grace (a Fork or Snapshot reading
      // a session ends soon), the head is refused, and its session, once
      // released, can be evicted for the next; one refusal per grace, so
      // the next head gets that room first.
      if (active.empty() && now - job.queued_at >= options_.idle_queue_grace &&
          now - last_idle_refusal_ >= options_.idle_queue_grace) {
        last_idle_refusal_ = now;
        auto refused = std::move(waiting_.front());
        waiting_.pop_front();
        Finish(std::move(refused),
               absl::ResourceExhaustedError(absl::StrCat(
                   "no KV memory for this call: it needs ", need,
                   " pages, no call is running, and the sessions of the calls waiting hold the rest of ",
                   max_pages, " (--kv-cache-mb); retry")),
               FinishReason::kError);
        continue;
      }
      break;
    }
    committed += need;
    pool->SetReserved(committed);
    active.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    Admit(*active.back());
  }
}

void Engine::Admit(Job& job) {
  job.admitted = true;
  job.admission = ++admissions_;
  // Room for everything this job may add, so appending a generated token
  // never reallocates in the step loop.
  job.kv.ReserveCapacity(job.input.size() + (job.gen ? job.gen->max_tokens : 0) +
                         (job.chat ? job.chat->after_end_of_turn.size() : 0));
  job.session->AppendTokens(job.input);
  if (job.chat) job.session->SetChat(job.chat->after_input);
  if (job.gen && job.gen->reseed) job.session->rng = SequenceRng(job.gen->sampling.seed);
}

void Engine::Finish(std::unique_ptr<Job> job, absl::Status status, FinishReason reason) {
  // A job refused before admission added nothing (its input is appended
  // at Admit): usage says so.
  if (!job->admitted) job->usage.prompt_tokens = 0;
  std::string final_text;
  // A call cut mid character leaves it to the next call that continues
  // the session (TokenStream's carry); one that ended for good releases it
  // as U+FFFD.
  // (A call that generated nothing leaves the carry it started with.)
  if (job->stream) {
    final_text = job->stream->Finish(reason == FinishReason::kLength || reason == FinishReason::kCancelled ||
                                     job->usage.generated_tokens == 0);
  }
  if (job->admitted) CloseChatTurn(*job, reason);
  job->usage.session_tokens = static_cast<int>(job->session->tokens.size());
  std::shared_ptr<Job> shared(std::move(job));
  auto persist_and_reply = [this, shared, status, reason, final_text] {
    absl::Status st = status;
    SessionInfo released;
    absl::Status persisted = sessions_->PersistAndRelease(shared->session, &released);
    if (shared->staging) shared->staging->Finish();
    if (!persisted.ok() && st.ok()) {
      // A full disk keeps its code (the client should free space or wait);
      // other store failures are transient to the client.
      const std::string why = absl::StrCat("the session could not be persisted: ", persisted.message());
      st = absl::IsResourceExhausted(persisted) ? absl::ResourceExhaustedError(why)
                                                : absl::UnavailableError(why);
    }
    shared->listener->OnDone(st, st.ok() || reason == FinishReason::kCancelled ? reason : FinishReason::kError,
                             shared->usage, final_text, released);
    in_flight_.fetch_sub(1);
  };
  // After the job's staged pages are files (page_staging.h), so the persist
  // does not write them again.
  if (shared->staging) {
    shared->staging->AfterStaged(
        [this, persist = std::move(persist_and_reply)]() mutable { io_->Submit(std::move(persist)); });
  } else {
    io_->Submit(std::move(persist_and_reply));
  }
}

void Engine::CloseChatTurn(Job& job, FinishReason reason) {
  if (!job.chat || !job.gen || reason != FinishReason::kStopToken) return;
  Session& s = *job.session;
  const std::vector<int32_t>& eot = job.chat->end_of_turn_ids;
  if (s.tokens.empty() || !std::binary_search(eot.begin(), eot.end(), s.tokens.back())) return;
  const std::vector<int32_t>& after = job.chat->after_end_of_turn;
  // A SLIDE session takes them past the context too: its next call slides
  // before it prefills them. An ERROR session leaves them out at its limit;
  // the next turn added starts with them (InputResolver's TurnCloser).
  if (job.slide || s.tokens.size() + after.size() <= static_cast<size_t>(sessions_->limits().max_context)) {
    s.AppendTokens(after);
  }
  ChatState closed = job.chat->after_input;
  closed.turn_open = false;
  s.SetChat(closed);
}

void Engine::EndJob(Active& active, Job* job, absl::Status status, FinishReason reason,
                    StepReport& report) {
  for (auto& slot : active) {
    if (slot.get() == job) {
      ending_.push_back({std::move(slot), std::move(status), reason});
      ++report.finished_jobs;
      return;
    }
  }
}

void Engine::DrawTokens() {
  const int rows = static_cast<int>(draws_.size());
  const int lanes = std::min(rows, static_cast<int>(samplers_.size()));
  const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
  auto draw_lane = [&](int lane) {
    for (int i = lane; i < rows; i += lanes) {
      Draw& d = draws_[i];
      Session& s = *d.job->session;
      const std::span<const float> l(d.logits, vocab);
      d.id = samplers_[lane].Sample(d.job->gen->sampling, l, s.tokens, &s.rng);
      if (d.job->gen->top_logprobs > 0) {
        d.top_count = samplers_[lane].Logprobs(l, d.id, d.job->gen->top_logprobs, &d.logprob, d.top);
      }
    }
  };
  if (lanes <= 1) {
    if (rows > 0) draw_lane(0);
    return;
  }
  threads_.Run(lanes, [&](int lane, int) { draw_lane(lane); });
}

void Engine::DeliverToken(Job& job, const Draw& draw) {
  Session& s = *job.session;
  const Tokenizer& tok = model_.tokenizer();
  GeneratedToken t;
  t.id = draw.id;
  if (job.gen->top_logprobs > 0) {
    t.logprob = draw.logprob;
    t.piece = tok.Piece(t.id);
    for (int i = 0; i < draw.top_count; ++i) {
      t.top.push_back({draw.top[i].first, draw.top[i].second, tok.Piece(draw.top[i].first)});
    }
  }
  job.kv.Append(t.id);
  ++job.usage.generated_tokens;
  const std::string text = job.stream->Push(t.id, static_cast<int>(s.tokens.size()));
  job.listener->OnToken(t, text);
}

void Engine::Step(Active& active) {
  current_active_ = &active;
  StepReport report;
  ReapCancelled(active, report);
  SlideFullJobs(active, report);
  Plan(active, report);
  Reserve(active, report);
  if (!items_.empty()) Deliver(active, RunForward(), report);
  FinishCaughtUpAppends(active, report);
  RecordStep(report);
  // Jobs that ended in this step persist and answer only now, so the step
  // is recorded before any of its results is acknowledged.
  for (Ending& e : ending_) Finish(std::move(e.job), std::move(e.status), e.reason);
  ending_.clear();
}

void Engine::ReapCancelled(Active& active, StepReport& report) {
  // Whatever a cancelled job produced stays in its session.
  for (auto& job : active) {
    if (job->handle->cancelled()) {
      EndJob(active, job.get(), absl::CancelledError("the call was cancelled"),
             FinishReason::kCancelled, report);
    }
  }
  active.erase(std::remove(active.begin(), active.end(), nullptr), active.end());
}

void Engine::SlideFullJobs(Active& active, StepReport& report) {
  const int max_context = sessions_->limits().max_context;
  for (auto& job : active) {
    if (!job->slide || job->kv.kv_length() < max_context) continue;
    if (job->kv.lag() <= 0 && !job->gen) continue;  // needs no new position
    // The pages the slide frees are this job's to grow back into: each
    // goes into the reserve as it is freed (at most all the job holds), so
    // a load by another call cannot take it meanwhile; exact again just
    // after. (Nothing is set aside before: the slide may need room first.)
    sessions_->pool()->ReserveNextFreed(job->session->kv->num_pages());
    // More than one slide only for a session stored under a larger
    // --max-context than this server's.
    while (job->kv.kv_length() >= max_context) {
      absl::StatusOr<int> dropped =
          job->kv.Slide(rotation_, max_context, job->chat ? &*job->chat : nullptr);
      if (!dropped.ok()) {
        EndJob(active, job.get(), dropped.status(), FinishReason::kError, report);
        break;
      }
      job->usage.tokens_dropped += *dropped;
    }
    ReserveForRunningJobs(active);
  }
  active.erase(std::remove(active.begin(), active.end(), nullptr), active.end());
}

void Engine::ReserveForRunningJobs(const Active& active) {
  int64_t committed = 0;
  for (const auto& a : active) {
    if (a) committed += PagesStillNeeded(*a);
  }
  sessions_->pool()->SetReserved(committed);
}

void Engine::Plan(const Active& active, StepReport& report) {
  plan_.clear();
  int budget = options_.max_batch_tokens;
  // Round robin: each step starts after the job the last one's rows ended
  // with (by admission, which is the active list's order), so when more
  // jobs wait than a step takes (kMaxDecodeRows decode rows, the token
  // budget for prefill) every one gets its turn, whatever its place, and
  // however many jobs before it end. Results do not depend on the batch.
  const size_t n = active.size();
  const auto first_after = [&](uint64_t admission) {
    const auto it = std::upper_bound(active.begin(), active.end(), admission,
                                     [](uint64_t a, const auto& job) { return a < job->admission; });
    return it == active.end() ? size_t{0} : static_cast<size_t>(it - active.begin());
  };
  const size_t decode_start = first_after(decode_after_);
  for (size_t i = 0; i < n; ++i) {
    const auto& job = active[(decode_start + i) % n];
    if (job->gen && job->kv.lag() == 0 && report.decode_rows < kMaxDecodeRows && budget > 0) {
      plan_.push_back({job.get(), true, 1});
      ++report.decode_rows;
      --budget;
      decode_after_ = job->admission;
    }
  }
  // Forks of one prompt side by side, so attention folds the pages they
  // share once for all of them (decode_row_order.h); a session with no
  // page yet is a group of its own.
  GroupRowsByKey(std::span<Planned>(plan_.data(), report.decode_rows), [](const Planned& p) {
    const std::vector<PageId>& pages = p.job->session->kv->page_table();
    return pages.empty() ? std::pair<PageId, const Job*>(-1, p.job) : std::pair<PageId, const Job*>(pages[0], nullptr);
  });
  const size_t prefill_start = first_after(prefill_after_);
  for (size_t i = 0; i < n; ++i) {
    const auto& job = active[(prefill_start + i) % n];
    // A SLIDE job's input may go past the context: up to it now, the rest
    // after the next slide (ERROR jobs' input always fits).
    int lag = std::min(job->kv.lag(), sessions_->limits().max_context - job->kv.kv_length());
    if (lag <= 0) continue;
    const int hit = job->kv.AttachCachedPrefix(lag);
    job->usage.cached_tokens += hit;
    report.cached_tokens += hit;
    lag -= hit;
    const int chunk = std::min(lag, budget);
    if (chunk <= 0) continue;
    plan_.push_back({job.get(), false, chunk});
    budget -= chunk;
    prefill_after_ = job->admission;
  }
}

void Engine::Reserve(Active& active, StepReport& report) {
  items_.clear();
  ran_.clear();
  for (const Planned& p : plan_) {
    if (absl::Status st = p.job->kv.Reserve(p.n_tokens); !st.ok()) {
      EndJob(active, p.job, st, FinishReason::kError, report);
      continue;
    }
    items_.push_back(p.job->kv.Item(p.n_tokens, p.decode ? Logits::kLast : Logits::kNone));
    ran_.push_back(p);
    if (p.decode) continue;
    ++report.prefill_chunks;
    report.prefill_tokens += p.n_tokens;
  }
  report.decode_rows = 0;
  for (const Planned& p : ran_) report.decode_rows += p.decode;
}

absl::Status Engine::RunForward() { return transformer_.Forward(items_, logits_.get()); }

void Engine::Deliver(Active& active, const absl::Status& forward, StepReport& report) {
  draws_.clear();
  int row = 0;
  for (const Planned& p : ran_) {
    if (!forward.ok()) {
      EndJob(active, p.job, forward, FinishReason::kError, report);
      continue;
    }
    const int keyed = p.job->kv.Commit();
    if (!p.decode) {
      StagePrefillPages(*p.job, keyed);
      continue;
    }
    draws_.push_back({p.job, logits_.get() + static_cast<size_t>(row) * model_.config().vocab_size,
                      draw_tops_.data() + static_cast<size_t>(row) * kMaxTopLogprobs});
    ++row;
  }
  DrawTokens();
  for (const Draw& d : draws_) {
    DeliverToken(*d.job, d);
    if (d.job->stream->finished()) {
      EndJob(active, d.job, absl::OkStatus(), d.job->stream->reason(), report);
    }
  }
  active.erase(std::remove(active.begin(), active.end(), nullptr), active.end());
}

void Engine::StagePrefillPages(Job& job, int first) {
  SessionStore* store = sessions_->store();
  if (store == nullptr) return;
  const int end = job.session->page_hashes->size();
  if (first >= end) return;
  if (!job.staging) job.staging.emplace(store, sessions_->pool(), io_);
  job.staging->Stage(*job.session, first, end);
}

void Engine::FinishCaughtUpAppends(Active& active, StepReport& report) {
  for (auto& job : active) {
    // An empty slot: a job Reserve ended, when no row was left to run (so
    // Deliver, which clears them, did not).
    if (job && !job->gen && job->kv.lag() <= 0) {
      EndJob(active, job.get(), absl::OkStatus(), FinishReason::kNone, report);
    }
  }
  active.erase(std::remove(active.begin(), active.end(), nullptr), active.end());
}

void Engine::RecordStep(const StepReport& report) {
  // What the running jobs may still need stays set aside (loads by other
  // calls cannot take it).
  ReserveForRunningJobs(*current_active_);
  int running = 0;
  for (const auto& a : *current_active_) running += a != nullptr;
  {
    absl::MutexLock lock(&mu_);
    ++stats_.steps;
    // Jobs that ended in this step are answered only after this, so no
    // caller ever sees its own finished call still counted as active.
    stats_.active_jobs = running;
    stats_.cached_tokens += report.cached_tokens;
    stats_.decode_tokens += report.decode_rows;
    stats_.prefill_tokens += report.prefill_tokens;
  }
  if (options_.step_observer) options_.step_observer(report);
}

}  // namespace kvs
