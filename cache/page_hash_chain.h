// PageHashChain: the chain of full-page hashes of one growing token
// sequence (cache/page_hash.h), computed incrementally.
//
// The chain owns hashes()[i] = hash of full page i (tokens [i*T, (i+1)*T))
// for i < size(). Extend hashes only the full pages it does not hold yet,
// so a sequence that grows by one page costs one SHA-256, not a rehash of
// its prefix. A partial tail page is never part of the chain (it changes
// as tokens arrive): NextPageHash gives its hash on demand. Truncate drops
// pages (the sequence was cut or rolled back); Adopt appends hashes the
// caller verified elsewhere (a stored record's) without hashing them.
//
// Contract: the `tokens` passed to Extend and PageHashes is the whole
// sequence, whose first size()*T tokens are the ones already hashed; the
// chain does not re-check them (it would cost the hashing it saves).
//
// After a context slide (model/kv_slide.h) the KV of the pages after the
// kept ones is no longer what a fresh prefill of their tokens computes, so
// their hashes must differ from a fresh chain's: SetSalt makes page
// `salt.page` chain from `salt.hash` (cache/page_hash.h SlideSalt) instead
// of the hash of page salt.page - 1. Pages before it keep their hashes (and
// stay shared with fresh prompts); every later hash follows the salted one.
//
// Not thread-safe: one owner (the sequence's) uses it at a time.
#ifndef KVSESSION_CACHE_PAGE_HASH_CHAIN_H_
#define KVSESSION_CACHE_PAGE_HASH_CHAIN_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/kv_geometry.h"
#include "cache/page_hash.h"

namespace kvs {

// Where a slid chain restarts: page `page` chains from `hash`.
struct ChainSalt {
  int page = 0;
  PageHash hash;
  bool operator==(const ChainSalt&) const = default;
};

class PageHashChain {
 public:
  // Requires geometry.page_tokens > 0. Page 0 chains from `start`
  // (cache/page_hash.h TenantChainStart; zeros by default).
  PageHashChain(std::string model_fingerprint, const KvGeometry& geometry,
                const PageHash& start = PageHash{});

  const std::string& model_fingerprint() const { return model_fingerprint_; }
  const KvGeometry& geometry() const { return geometry_; }
  const PageHash& start() const { return start_; }

  // Full pages hashed, and their hashes.
  int size() const { return static_cast<int>(hashes_.size()); }
  std::span<const PageHash> hashes() const { return hashes_; }

  // Hashes full pages [size(), min(max_pages, tokens.size() / T)) of
  // `tokens`. Returns how many it hashed (0 if the chain already covers
  // them).
  int Extend(std::span<const int32_t> tokens, int max_pages = INT32_MAX);

  // The hash of the page after the last full one, holding `page_tokens`
  // (1..T tokens): a partial tail, or a full page one wants to look up
  // before extending. Does not change the chain.
  PageHash NextPageHash(std::span<const int32_t> page_tokens) const;

  // One hash per page covering [0, kv_length) of `tokens` (what a
  // SessionRecord's page_hashes holds): the full pages, extending the
  // chain as needed, then the partial tail if kv_length % T != 0. Requires
  // kv_length <= tokens.size() and the chain to hold no page beyond
  // kv_length / T.
  std::vector<PageHash> PageHashes(std::span<const int32_t> tokens, int kv_length);

  // Keeps the first min(n_pages, size()) pages. Clears the salt when
  // n_pages is below its page (what remains was never slid).
  void Truncate(int n_pages);

  // Page salt.page (and so every later one) chains from salt.hash.
  // Requires size() <= salt.page (call Truncate first).
  void SetSalt(const ChainSalt& salt);
  const std::optional<ChainSalt>& salt() const { return salt_; }

  // Appends hashes of the next full pages that the caller has verified
  // (e.g. loaded from a record the store checked). Not hashed, not counted.
  void Adopt(std::span<const PageHash> verified);

  // SHA-256 page hashes this chain computed since construction (Extend,
  // NextPageHash and PageHashes each count every page they hash).
  int64_t pages_hashed() const { return pages_hashed_; }

 private:
  const PageHash& Last() const;

  std::string model_fingerprint_;
  KvGeometry geometry_;
  PageHash start_;
  std::vector<PageHash> hashes_;
  std::optional<ChainSalt> salt_;
  mutable int64_t pages_hashed_ = 0;
};

}  // namespace kvs

#endif  // KVSESSION_CACHE_PAGE_HASH_CHAIN_H_
