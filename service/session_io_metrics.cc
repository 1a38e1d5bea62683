#include "service/session_io_metrics.h"

#include <atomic>

namespace kvs {
namespace {
std::atomic<const SessionIoMetrics*> g_metrics{nullptr};
}  // namespace

void EnableSessionIoMetrics(metrics::Registry* r, int64_t page_bytes) {
  auto* m = new SessionIoMetrics;  // lives as long as the process
  m->page_bytes = page_bytes;
  m->prefix_lookups = r->AddCounter("kvsession_prefix_cache_lookups_total",
                                    "Full prompt pages looked up in the prefix cache.");
  m->prefix_hits = r->AddCounter("kvsession_prefix_cache_hits_total",
                                 "Prompt pages found in the prefix cache (shared, not prefilled).");
  m->evictions = r->AddCounter("kvsession_session_evictions_total",
                               "Idle sessions whose KV was dropped from memory (it stays stored).");
  m->evicted_bytes = r->AddCounter("kvsession_session_evicted_bytes_total",
                                   "KV bytes the evicted sessions referenced.");
  m->restores = r->AddCounter("kvsession_session_restores_total",
                              "Stored sessions whose KV was loaded back into memory.");
  m->restored_bytes = r->AddCounter("kvsession_session_restored_bytes_total",
                                    "KV bytes read from the store by restores (cached pages excluded).");
  m->restore_seconds = r->AddHistogram("kvsession_session_restore_duration_seconds",
                                       "Seconds to load one session's KV from the store.",
                                       metrics::LatencyBuckets());
  m->persist_seconds = r->AddHistogram("kvsession_persist_duration_seconds",
                                       "Seconds of one atomic store write of session records.",
                                       metrics::LatencyBuckets());
  m->persist_failures = r->AddCounter("kvsession_persist_failures_total",
                                      "Store writes of session records that failed.");
  g_metrics.store(m, std::memory_order_release);
}

const SessionIoMetrics* GetSessionIoMetrics() { return g_metrics.load(std::memory_order_acquire); }

}  // namespace kvs
