#include "service/page_owners.h"

namespace kvs {

PageOwner PageOwners::Of(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  auto [it, added] = numbers_.try_emplace(tenant, static_cast<PageOwner>(numbers_.size() + 1));
  return it->second;
}

std::optional<PageOwner> PageOwners::Find(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = numbers_.find(tenant);
  if (it == numbers_.end()) return std::nullopt;
  return it->second;
}

}  // namespace kvs
