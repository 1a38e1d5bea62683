#include "service/server_metrics.h"

#include <algorithm>

namespace kvs {

ServerMetrics::ServerMetrics(metrics::Registry* registry, int max_batch_tokens, int max_queued_jobs)
    : registry_(registry),
      batch_tokens_(registry->AddHistogram("kvsession_engine_step_batch_tokens",
                                           "Tokens per engine step (prefill chunks + decode tokens).",
                                           metrics::CountBuckets(std::max(1, max_batch_tokens)))),
      batch_jobs_(registry->AddHistogram("kvsession_engine_step_batch_jobs",
                                         "Jobs (calls) that ran in one engine step.",
                                         metrics::CountBuckets(std::max(1, max_batch_tokens)))),
      queue_depth_(registry->AddHistogram(
          "kvsession_engine_step_queue_depth",
          "Calls waiting for KV memory to be admitted, seen after each engine step.",
          metrics::CountBuckets(std::max(1, max_queued_jobs)))) {}

std::function<void(const StepReport&)> ServerMetrics::StepObserver() {
  return [this](const StepReport& r) { OnStep(r); };
}

void ServerMetrics::OnStep(const StepReport& r) {
  batch_tokens_->Observe(r.decode_rows + r.prefill_tokens);
  batch_jobs_->Observe(r.decode_rows + r.prefill_chunks);
  // The observer runs outside the engine's mutex, so Stats() may lock it.
  if (Engine* engine = engine_.load(std::memory_order_acquire)) queue_depth_->Observe(engine->Stats().queued_jobs);
}

void ServerMetrics::Attach(SessionManager* sessions, Engine* engine) {
  engine_.store(engine, std::memory_order_release);
  registry_->AddCollector([engine](metrics::Exposition& out) {
    const EngineStats es = engine->Stats();
    out.Counter("kvsession_engine_steps_total", "Forward passes the engine ran.", {}, es.steps);
    out.Counter("kvsession_prefill_tokens_total", "Prompt tokens run through the model (prefill).", {},
                es.prefill_tokens);
    out.Counter("kvsession_decode_tokens_total", "Tokens generated (decode).", {}, es.decode_tokens);
    out.Counter("kvsession_prefix_cache_hit_tokens_total",
                "Prompt tokens taken from the prefix cache instead of being prefilled.", {},
                es.cached_tokens);
    out.Gauge("kvsession_engine_active_jobs", "Calls the engine is running.", {}, es.active_jobs);
    out.Gauge("kvsession_engine_queued_jobs", "Calls waiting for KV memory to be admitted.", {},
              es.queued_jobs);
  });
  registry_->AddCollector([sessions](metrics::Exposition& out) {
    const PagePoolStats ps = sessions->pool()->Stats();
    out.Family("kvsession_kv_pages", "KV cache pages: max (the budget), in_use (referenced), "
               "shared (referenced more than once), cached (free, holding a reusable prefix), "
               "mapped (memory mapped so far, any state).", "gauge");
    out.Sample("kvsession_kv_pages", {{"state", "max"}}, ps.max_pages);
    out.Sample("kvsession_kv_pages", {{"state", "in_use"}}, ps.pages_in_use);
    out.Sample("kvsession_kv_pages", {{"state", "shared"}}, ps.pages_shared);
    out.Sample("kvsession_kv_pages", {{"state", "cached"}}, ps.pages_cached);
    out.Sample("kvsession_kv_pages", {{"state", "mapped"}}, ps.pages_mapped);
    out.Gauge("kvsession_kv_warm_target_pages",
              "Free KV pages kept mapped ahead of use (--kv-warm-tokens, raised to the longest stored "
              "session at startup; the budget with --kv-prefault; 0 when mapped on first use).",
              {}, ps.pages_warm_target);
    out.Gauge("kvsession_kv_page_size_bytes", "Bytes of one KV page.", {}, ps.page_bytes);
    out.Gauge("kvsession_kv_in_use_bytes", "Bytes of the KV pages in use.", {}, ps.bytes_in_use());
    out.Gauge("kvsession_kv_saved_by_sharing_bytes",
              "Bytes that page sharing (forks, prefix cache) saves over separate copies.", {},
              ps.bytes_saved_by_sharing());
    out.Gauge("kvsession_sessions", "Sessions the server holds (all are stored).", {},
              sessions->session_count());
    out.Gauge("kvsession_sessions_resident", "Sessions whose KV is in memory.", {}, sessions->resident_count());
    const StoreStats ss = sessions->store()->Stats();
    out.Gauge("kvsession_store_pages", "Distinct KV pages in the store.", {}, ss.pages);
    out.Gauge("kvsession_store_page_bytes", "Encoded bytes of the stored KV pages.", {}, ss.page_bytes);
    out.Gauge("kvsession_store_sessions", "Session records in the store.", {}, ss.sessions);
    out.Gauge("kvsession_store_checkpoints", "Checkpoint records in the store.", {}, ss.checkpoints);
    out.Gauge("kvsession_store_corrupt_records", "Records on disk that could not be read.", {},
              ss.corrupt_records);
  });
}

}  // namespace kvs
