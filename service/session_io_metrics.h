// Counters of sessions' KV moving between memory and the store, observed
// where it moves:
//   prefix-cache page lookups and hits (SessionKv::AttachCachedPrefix),
//   evictions of idle sessions' KV from memory (SessionRegistry::EvictIfIdle),
//   restores of a stored session's KV into memory (SessionPersistence::LoadKv),
//   persists of session records (SessionPersistence::Write / WriteBranches).
//
// Process-wide: kvsessiond enables them once at startup, before serving;
// without that (tests, tools) nothing is observed and the hooks cost one
// atomic load. The metrics are owned by the registry given to Enable, which
// must outlive every call that touches a session.
// Thread safety: Enable before serving; Get and the metrics' updates from
// any thread (lock-free, no allocation).
#ifndef KVSESSION_SERVICE_SESSION_IO_METRICS_H_
#define KVSESSION_SERVICE_SESSION_IO_METRICS_H_

#include <cstdint>

#include "service/metrics_registry.h"

namespace kvs {

struct SessionIoMetrics {
  int64_t page_bytes = 0;  // bytes of one KV page in memory
  metrics::Counter* prefix_lookups = nullptr;  // full pages looked up
  metrics::Counter* prefix_hits = nullptr;     // of which found
  metrics::Counter* evictions = nullptr;
  metrics::Counter* evicted_bytes = nullptr;   // KV bytes the evicted sessions referenced
  metrics::Counter* restores = nullptr;        // successful loads
  metrics::Counter* restored_bytes = nullptr;  // KV bytes read from the store
  metrics::Histogram* restore_seconds = nullptr;
  metrics::Histogram* persist_seconds = nullptr;  // one atomic store write, successful or not
  metrics::Counter* persist_failures = nullptr;
};

// Registers the series (docs/operations.md) in `registry` and makes them
// the process's; `page_bytes` is one KV page's size in memory.
void EnableSessionIoMetrics(metrics::Registry* registry, int64_t page_bytes);
// The process's metrics, or null.
const SessionIoMetrics* GetSessionIoMetrics();

}  // namespace kvs

#endif  // KVSESSION_SERVICE_SESSION_IO_METRICS_H_
