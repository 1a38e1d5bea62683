// MigrationMemory: the RAM that migration streams in flight hold on this
// server (ImportSession buffers its stream until the client closes it;
// ExportSession builds its stream whole, counted page by page as it is
// built, and keeps it until the client has read it), bounded in total and per tenant, so no client can hold more
// than its share by opening streams it never finishes.
//
//   absl::StatusOr<MigrationMemory::Lease> lease = memory.Take(tenant, bytes);
//   lease->Grow(more);   // an import's next chunk
//   // the bytes return when the lease is destroyed
//
// Take and Grow: RESOURCE_EXHAUSTED, and nothing taken, when the bytes
// would pass the server's total or the tenant's share; the message gives
// both figures in MiB (never client input). Taking 0 bytes always works.
// The tenant "" (a server without API keys, where every caller is one
// tenant) has the whole total as its share.
//
// Thread-safe. A Lease must not outlive its MigrationMemory.
#ifndef KVSESSION_SERVICE_MIGRATION_MEMORY_H_
#define KVSESSION_SERVICE_MIGRATION_MEMORY_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace kvs {

class MigrationMemory {
 public:
  MigrationMemory(int64_t total_bytes, int64_t per_tenant_bytes)
      : total_limit_(total_bytes), tenant_limit_(per_tenant_bytes) {}
  MigrationMemory(const MigrationMemory&) = delete;
  MigrationMemory& operator=(const MigrationMemory&) = delete;

  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept;
    ~Lease() { Return(); }
    absl::Status Grow(int64_t bytes);
    int64_t bytes() const { return bytes_; }

   private:
    friend class MigrationMemory;
    void Return();
    MigrationMemory* memory_ = nullptr;
    std::string tenant_;
    int64_t bytes_ = 0;
  };

  absl::StatusOr<Lease> Take(const std::string& tenant, int64_t bytes);
  // Bytes held now, in all and by `tenant`.
  int64_t held() const;
  int64_t held_by(const std::string& tenant) const;

 private:
  absl::Status Add(const std::string& tenant, int64_t bytes);
  void Remove(const std::string& tenant, int64_t bytes);

  const int64_t total_limit_;
  const int64_t tenant_limit_;
  mutable absl::Mutex mu_;
  int64_t held_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, int64_t> held_by_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_MIGRATION_MEMORY_H_
