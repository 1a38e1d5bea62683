#include "service/session_expiry.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/base/internal/raw_logging.h"
#include "absl/time/clock.h"

namespace kvs {

SessionExpiry::SessionExpiry(SessionManager* sessions, absl::Duration idle_ttl)
    : sessions_(sessions), idle_ttl_(idle_ttl) {}

SessionExpiry::~SessionExpiry() { Stop(); }

void SessionExpiry::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void SessionExpiry::Start() {
  thread_ = std::thread([this] { Run(); });
}

absl::Duration SessionExpiry::SweepInterval(absl::Duration idle_ttl) {
  return std::clamp(idle_ttl / 8, absl::Milliseconds(100), absl::Seconds(60));
}

int SessionExpiry::Sweep(absl::Time now) {
  const absl::Time cutoff = now - idle_ttl_;
  int expired = 0;
  int failed = 0;
  absl::Status first_failure;
  for (const std::string& id : sessions_->UnusedSince(cutoff)) {
    if (stop_.HasBeenNotified()) break;
    const absl::StatusOr<bool> deleted = sessions_->DeleteIfUnusedSince(id, cutoff);
    if (!deleted.ok()) {
      // The store's: the session waits for the next sweep.
      if (failed++ == 0) first_failure = deleted.status();
    } else if (*deleted) {
      ++expired;
      expired_count_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (failed > 0) {
    ABSL_RAW_LOG(WARNING, "idle session expiry: %d sessions stay for the next sweep; the first: %s", failed,
                 std::string(first_failure.message()).c_str());
  }
  return expired;
}

void SessionExpiry::Run() {
  const absl::Duration interval = SweepInterval(idle_ttl_);
  while (!stop_.WaitForNotificationWithTimeout(interval)) Sweep(absl::Now());
}

}  // namespace kvs
