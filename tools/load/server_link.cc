#include "tools/load/server_link.h"

namespace kvs::load {

std::optional<ServerLink::Lease> ServerLink::BeginOperation(const std::atomic<bool>& stop) {
  absl::MutexLock lock(&mu_);
  while (!stop.load()) {
    if (mu_.AwaitWithTimeout(absl::Condition(&up_), absl::Milliseconds(100))) {
      ++in_flight_;
      return Lease{epoch_, address_};
    }
  }
  return std::nullopt;
}

void ServerLink::EndOperation() {
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

bool ServerLink::KillWindow(uint64_t epoch) const {
  absl::MutexLock lock(&mu_);
  return !up_ || epoch_ != epoch;
}

void ServerLink::MarkDown() {
  absl::MutexLock lock(&mu_);
  up_ = false;
}

bool ServerLink::WaitQuiet(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  bool (*none)(int*) = [](int* n) { return *n == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(none, &in_flight_), timeout);
}

void ServerLink::MarkUp(const std::string& address) {
  absl::MutexLock lock(&mu_);
  address_ = address;
  ++epoch_;
  up_ = true;
}

}  // namespace kvs::load
