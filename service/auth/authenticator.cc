#include "service/auth/authenticator.h"

#include <openssl/crypto.h>

#include <cctype>

namespace kvs {
namespace {

bool Space(char c) { return c == ' ' || c == '\t'; }

std::string_view Strip(std::string_view s) {
  while (!s.empty() && Space(s.front())) s.remove_prefix(1);
  while (!s.empty() && Space(s.back())) s.remove_suffix(1);
  return s;
}

// "Bearer " in any case.
bool StartsWithBearer(std::string_view s) {
  constexpr std::string_view kBearer = "bearer ";
  if (s.size() < kBearer.size()) return false;
  for (size_t i = 0; i < kBearer.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != kBearer[i]) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::FromFile(const std::string& path) {
  absl::StatusOr<ApiKeyFile> keys = LoadApiKeyFile(path);
  if (!keys.ok()) return keys.status();
  return std::make_unique<Authenticator>(*std::move(keys), path);
}

Authenticator::Authenticator(ApiKeyFile keys, std::string path)
    : path_(std::move(path)), keys_(std::make_shared<const ApiKeyFile>(std::move(keys))) {}

std::shared_ptr<const ApiKeyFile> Authenticator::keys() const {
  absl::MutexLock lock(&mu_);
  return keys_;
}

absl::StatusOr<Principal> Authenticator::Authenticate(std::optional<std::string_view> authorization) const {
  if (!authorization) return absl::UnauthenticatedError("missing API key (send authorization: Bearer KEY)");
  const std::string_view value = Strip(*authorization);
  const std::string_view key = StartsWithBearer(value) ? Strip(value.substr(7)) : std::string_view();
  if (key.empty()) return absl::UnauthenticatedError("malformed authorization header (expected Bearer KEY)");
  const Sha256Digest digest = Sha256(key);
  const std::shared_ptr<const ApiKeyFile> file = keys();
  // Every entry is compared (no early exit): the time does not depend on
  // which entry, if any, matches.
  const ApiKeyEntry* match = nullptr;
  for (const ApiKeyEntry& e : file->entries) {
    const bool equal = CRYPTO_memcmp(e.key_sha256.data(), digest.data(), digest.size()) == 0;
    if (equal) match = &e;
  }
  if (match == nullptr) return absl::UnauthenticatedError("invalid API key");
  return match->principal;
}

absl::StatusOr<ApiKeyFile> Authenticator::Reload() {
  if (path_.empty()) return absl::FailedPreconditionError("no auth keys file to reload");
  absl::StatusOr<ApiKeyFile> keys = LoadApiKeyFile(path_);
  if (!keys.ok()) return keys.status();
  auto fresh = std::make_shared<const ApiKeyFile>(*keys);
  absl::MutexLock lock(&mu_);
  keys_ = std::move(fresh);
  return keys;
}

}  // namespace kvs
