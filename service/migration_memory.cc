#include "service/migration_memory.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace kvs {

MigrationMemory::Lease& MigrationMemory::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Return();
    memory_ = std::exchange(other.memory_, nullptr);
    tenant_ = std::move(other.tenant_);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

absl::Status MigrationMemory::Lease::Grow(int64_t bytes) {
  if (absl::Status st = memory_->Add(tenant_, bytes); !st.ok()) return st;
  bytes_ += bytes;
  return absl::OkStatus();
}

void MigrationMemory::Lease::Return() {
  if (memory_ != nullptr && bytes_ > 0) memory_->Remove(tenant_, bytes_);
  bytes_ = 0;
}

absl::StatusOr<MigrationMemory::Lease> MigrationMemory::Take(const std::string& tenant, int64_t bytes) {
  if (absl::Status st = Add(tenant, bytes); !st.ok()) return st;
  Lease lease;
  lease.memory_ = this;
  lease.tenant_ = tenant;
  lease.bytes_ = bytes;
  return lease;
}

int64_t MigrationMemory::held() const {
  absl::MutexLock lock(&mu_);
  return held_;
}

int64_t MigrationMemory::held_by(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = held_by_.find(tenant);
  return it == held_by_.end() ? 0 : it->second;
}

absl::Status MigrationMemory::Add(const std::string& tenant, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  if (bytes == 0) return absl::OkStatus();
  // The tenant "" (a server without API keys: one tenant) has no share
  // of its own: the total is its share.
  const auto it = held_by_.find(tenant);
  const int64_t mine = it == held_by_.end() ? 0 : it->second;
  const int64_t share = tenant.empty() ? total_limit_ : tenant_limit_;
  if (held_ + bytes > total_limit_ || mine + bytes > share) {
    const bool tenant_full = mine + bytes > share;
    return absl::ResourceExhaustedError(absl::StrCat(
        "migration streams in flight would hold ", ((tenant_full ? mine : held_) + bytes) >> 20, " MiB, past ",
        tenant_full ? "the tenant's share of " : "the server's ", (tenant_full ? share : total_limit_) >> 20,
        " MiB (--max-migration-mb); finish or cancel other migrations, or retry later"));
  }
  held_by_[tenant] = mine + bytes;
  held_ += bytes;
  return absl::OkStatus();
}

void MigrationMemory::Remove(const std::string& tenant, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  held_ -= bytes;
  auto it = held_by_.find(tenant);
  if (it != held_by_.end() && (it->second -= bytes) <= 0) held_by_.erase(it);
}

}  // namespace kvs
