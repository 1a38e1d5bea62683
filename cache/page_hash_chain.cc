#include "cache/page_hash_chain.h"

#include <algorithm>
#include <utility>

#include "absl/base/internal/raw_logging.h"

namespace kvs {

PageHashChain::PageHashChain(std::string model_fingerprint, const KvGeometry& geometry, const PageHash& start)
    : model_fingerprint_(std::move(model_fingerprint)), geometry_(geometry), start_(start) {
  ABSL_RAW_CHECK(geometry_.page_tokens > 0, "page_tokens must be positive");
}

const PageHash& PageHashChain::Last() const {
  if (salt_ && salt_->page == size()) return salt_->hash;
  return hashes_.empty() ? start_ : hashes_.back();  // the seed: zeros, or a tenant's
}

int PageHashChain::Extend(std::span<const int32_t> tokens, int max_pages) {
  const size_t t = static_cast<size_t>(geometry_.page_tokens);
  const int full = static_cast<int>(std::min<size_t>(tokens.size() / t, static_cast<size_t>(max_pages)));
  int hashed = 0;
  while (size() < full) {
    const PageHash next = NextPageHash(tokens.subspan(static_cast<size_t>(size()) * t, t));
    hashes_.push_back(next);
    ++hashed;
  }
  return hashed;
}

PageHash PageHashChain::NextPageHash(std::span<const int32_t> page_tokens) const {
  ABSL_RAW_CHECK(!page_tokens.empty() &&
                     page_tokens.size() <= static_cast<size_t>(geometry_.page_tokens),
                 "a page holds 1..page_tokens tokens");
  ++pages_hashed_;
  return ChainPageHash(Last(), model_fingerprint_, geometry_, page_tokens);
}

std::vector<PageHash> PageHashChain::PageHashes(std::span<const int32_t> tokens, int kv_length) {
  ABSL_RAW_CHECK(kv_length >= 0 && static_cast<size_t>(kv_length) <= tokens.size(),
                 "kv_length out of range");
  const int t = geometry_.page_tokens;
  const int full = kv_length / t;
  ABSL_RAW_CHECK(size() <= full, "the chain holds pages beyond kv_length");
  Extend(tokens.first(static_cast<size_t>(kv_length)));
  std::vector<PageHash> out(hashes_.begin(), hashes_.end());
  if (kv_length % t != 0) {
    out.push_back(NextPageHash(
        tokens.subspan(static_cast<size_t>(full) * t, static_cast<size_t>(kv_length - full * t))));
  }
  return out;
}

void PageHashChain::Truncate(int n_pages) {
  if (n_pages >= 0 && n_pages < size()) hashes_.resize(static_cast<size_t>(n_pages));
  if (salt_ && n_pages < salt_->page) salt_.reset();
}

void PageHashChain::SetSalt(const ChainSalt& salt) {
  ABSL_RAW_CHECK(salt.page >= size(), "SetSalt: the chain holds pages past the salted one");
  salt_ = salt;
}

void PageHashChain::Adopt(std::span<const PageHash> verified) {
  hashes_.insert(hashes_.end(), verified.begin(), verified.end());
}

}  // namespace kvs
