#include "service/token_latency_metrics.h"

#include <atomic>

namespace kvs {
namespace {
std::atomic<const TokenLatencyMetrics*> g_metrics{nullptr};
}  // namespace

void EnableTokenLatencyMetrics(metrics::Registry* registry) {
  auto* m = new TokenLatencyMetrics;  // lives as long as the process
  m->time_to_first_token = registry->AddHistogram(
      "kvsession_time_to_first_token_seconds",
      "Generate: seconds from the call's job to its first token (queueing and prefill included).",
      metrics::TokenLatencyBuckets());
  m->time_per_token = registry->AddHistogram(
      "kvsession_time_per_output_token_seconds",
      "Generate: seconds between consecutive tokens of one call (after the first).",
      metrics::TokenLatencyBuckets());
  g_metrics.store(m, std::memory_order_release);
}

const TokenLatencyMetrics* GetTokenLatencyMetrics() { return g_metrics.load(std::memory_order_acquire); }

}  // namespace kvs
