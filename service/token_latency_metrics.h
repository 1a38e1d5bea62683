// Time to first token and time per token of Generate calls, observed by
// GenerateReactor (service/generate_reactor.cc) as the engine delivers
// tokens: the first token's time from the moment the call's job is created
// (queueing and prefill included), every later token's time since the
// previous one.
//
// Process-wide: kvsessiond sets the histograms once at startup, before
// serving; without them (tests, tools) nothing is observed. The histograms
// are borrowed and must outlive every Generate call.
// Thread safety: Set before serving; Get from any thread.
#ifndef KVSESSION_SERVICE_TOKEN_LATENCY_METRICS_H_
#define KVSESSION_SERVICE_TOKEN_LATENCY_METRICS_H_

#include "service/metrics_registry.h"

namespace kvs {

struct TokenLatencyMetrics {
  metrics::Histogram* time_to_first_token = nullptr;  // seconds
  metrics::Histogram* time_per_token = nullptr;       // seconds, tokens after the first
};

// Registers kvsession_time_to_first_token_seconds and
// kvsession_time_per_output_token_seconds in `registry` and makes them the
// process's. `registry` must outlive every Generate call.
void EnableTokenLatencyMetrics(metrics::Registry* registry);
// The process's histograms, or null.
const TokenLatencyMetrics* GetTokenLatencyMetrics();

}  // namespace kvs

#endif  // KVSESSION_SERVICE_TOKEN_LATENCY_METRICS_H_
