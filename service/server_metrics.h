// ServerMetrics: kvsessiond's state as Prometheus series, read at scrape
// time from the counters GetServerInfo already reports (nothing counted
// twice), plus histograms of the engine's steps:
//   engine    kvsession_engine_steps_total, kvsession_prefill_tokens_total,
//             kvsession_decode_tokens_total, kvsession_prefix_cache_hit_tokens_total,
//             kvsession_engine_active_jobs, kvsession_engine_queued_jobs,
//             kvsession_engine_step_batch_tokens / _step_batch_jobs /
//             _step_queue_depth (histograms, one observation per step)
//   KV cache  kvsession_kv_pages{state="max|in_use|shared|cached"},
//             kvsession_kv_page_size_bytes, kvsession_kv_in_use_bytes,
//             kvsession_kv_saved_by_sharing_bytes
//   sessions  kvsession_sessions (stored and held), kvsession_sessions_resident
//   store     kvsession_store_pages, kvsession_store_page_bytes,
//             kvsession_store_sessions, kvsession_store_checkpoints,
//             kvsession_store_corrupt_records
// docs/operations.md lists them with their meaning.
//
// Ownership: borrows everything; all must outlive the registry's scrapes.
// Thread safety: collectors run on the scraping thread and read through
// the components' own thread-safe Stats(); the step observer runs on the
// engine thread and only updates histograms.
#ifndef KVSESSION_SERVICE_SERVER_METRICS_H_
#define KVSESSION_SERVICE_SERVER_METRICS_H_

#include <atomic>
#include <functional>

#include "service/engine.h"
#include "service/metrics_registry.h"
#include "service/session_manager.h"

namespace kvs {

class ServerMetrics {
 public:
  // Registers the step histograms; `max_batch_tokens` and `max_queued_jobs`
  // size their buckets.
  ServerMetrics(metrics::Registry* registry, int max_batch_tokens, int max_queued_jobs);
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // For EngineOptions::step_observer (before the engine is built).
  std::function<void(const StepReport&)> StepObserver();
  // Registers the scrape-time collectors of `sessions` and `engine`; the
  // step observer reads the queue depth from `engine` from now on.
  void Attach(SessionManager* sessions, Engine* engine);

 private:
  void OnStep(const StepReport& report);

  metrics::Registry* const registry_;
  metrics::Histogram* batch_tokens_;
  metrics::Histogram* batch_jobs_;
  metrics::Histogram* queue_depth_;
  std::atomic<Engine*> engine_{nullptr};
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_SERVER_METRICS_H_
