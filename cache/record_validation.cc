#include "cache/record_validation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "cache/crc32c.h"
#include "cache/page_codec.h"
#include "cache/page_hash_chain.h"

namespace kvs {

KvGeometryRecord ToGeometryRecord(const KvGeometry& g) {
  KvGeometryRecord r;
  r.set_n_layers(g.n_layers);
  r.set_n_kv_heads(g.n_kv_heads);
  r.set_head_dim(g.head_dim);
  r.set_page_tokens(g.page_tokens);
  r.set_dtype(static_cast<int32_t>(g.dtype));
  return r;
}

absl::StatusOr<KvGeometry> FromGeometryRecord(const KvGeometryRecord& r) {
  if (r.dtype() < 0 || !KvDtypeKnown(static_cast<uint32_t>(r.dtype()))) {
    return absl::InvalidArgumentError(absl::StrCat("geometry dtype ", r.dtype(), " is unknown"));
  }
  KvGeometry g;
  g.n_layers = r.n_layers();
  g.n_kv_heads = r.n_kv_heads();
  g.head_dim = r.head_dim();
  g.page_tokens = r.page_tokens();
  g.dtype = static_cast<KvDtype>(r.dtype());
  if (absl::Status s = ValidateGeometry(g); !s.ok()) return s;
  return g;
}

namespace {

// The record's geometry after checking it and kv_length.
absl::StatusOr<KvGeometry> CheckShape(const SessionRecord& record) {
  absl::StatusOr<KvGeometry> g = FromGeometryRecord(record.geometry());
  if (!g.ok()) return g;
  if (record.kv_length() < 0 || record.kv_length() > record.tokens_size()) {
    return absl::InvalidArgumentError(absl::StrCat("kv_length ", record.kv_length(),
                                                   " is outside [0, ", record.tokens_size(),
                                                   "] (the token count)"));
  }
  return g;
}

std::span<const int32_t> TokensOf(const SessionRecord& record) {
  return std::span<const int32_t>(record.tokens().data(), record.tokens_size());
}

absl::Status WrongHash(size_t i, const PageHash& expected) {
  return absl::InvalidArgumentError(absl::StrCat(
      "page_hashes[", i, "] is not the hash of the record's tokens (expected ", expected.hex(),
      ")"));
}

}  // namespace

absl::StatusOr<std::optional<ChainSalt>> RecordSalt(const SessionRecord& record) {
  if (record.slide_salt().empty()) return std::optional<ChainSalt>();
  std::optional<PageHash> hash = PageHash::FromBytes(record.slide_salt());
  if (!hash || record.slide_salt_page() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("slide_salt of ", record.slide_salt().size(),
                                                   " bytes at page ", record.slide_salt_page(),
                                                   " is not a 16-byte salt at a page >= 0"));
  }
  return std::optional<ChainSalt>(ChainSalt{record.slide_salt_page(), *hash});
}

absl::Status FillPageHashes(SessionRecord* record) {
  absl::StatusOr<KvGeometry> g = CheckShape(*record);
  if (!g.ok()) return g.status();
  absl::StatusOr<std::optional<ChainSalt>> salt = RecordSalt(*record);
  if (!salt.ok()) return salt.status();
  PageHashChain chain(record->model_fingerprint(), *g,
                      ChainStart(record->owner(), record->shared_prefix_chain()));
  if (*salt) chain.SetSalt(**salt);
  const std::vector<PageHash> hashes = chain.PageHashes(TokensOf(*record), record->kv_length());
  record->clear_page_hashes();
  for (const PageHash& h : hashes) {
    record->add_page_hashes(std::string(h.view()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PageHash>> CheckSessionRecord(const SessionRecord& record) {
  absl::StatusOr<VerifiedPages> verified = VerifySessionRecord(record, nullptr, nullptr);
  if (!verified.ok()) return verified.status();
  return std::move(verified->hashes);
}

uint32_t PageTokensCrc(std::span<const int32_t> tokens) {
  const uint32_t n = static_cast<uint32_t>(tokens.size());
  return Crc32c(tokens.data(), tokens.size_bytes(), Crc32c(&n, sizeof(n)));
}

absl::StatusOr<VerifiedPages> VerifySessionRecord(const SessionRecord& record,
                                                  const VerifiedPages* reference,
                                                  int64_t* pages_hashed) {
  absl::StatusOr<KvGeometry> g = CheckShape(record);
  if (!g.ok()) return g.status();
  const int t = g->page_tokens;
  const int kv_length = record.kv_length();
  const int n_pages = (kv_length + t - 1) / t;
  const int full = kv_length / t;
  if (record.page_hashes_size() != n_pages) {
    return absl::InvalidArgumentError(absl::StrCat("record has ", record.page_hashes_size(),
                                                   " page hashes, its kv_length ", kv_length,
                                                   " needs ", n_pages));
  }
  absl::StatusOr<std::optional<ChainSalt>> salt = RecordSalt(record);
  if (!salt.ok()) return salt.status();
  const std::span<const int32_t> tokens = TokensOf(record);
  VerifiedPages out;
  out.salt = *salt;
  out.start = ChainStart(record.owner(), record.shared_prefix_chain());
  out.model_fingerprint = record.model_fingerprint();
  out.geometry = *g;
  out.hashes.reserve(n_pages);
  out.token_crcs.reserve(n_pages);
  for (int i = 0; i < n_pages; ++i) {
    const int begin = i * t;
    out.token_crcs.push_back(
        PageTokensCrc(tokens.subspan(begin, std::min(t, kv_length - begin))));
    // A listed value of the wrong size can match no hash: give it one that
    // the check below finds wrong unless SHA-256 gives all zeros.
    out.hashes.push_back(PageHash::FromBytes(record.page_hashes(i)).value_or(PageHash{}));
  }

  // The common prefix with the reference needs no hashing.
  int same = 0;
  if (reference != nullptr && reference->model_fingerprint == out.model_fingerprint &&
      reference->geometry == out.geometry && reference->start == out.start &&
      reference->token_crcs.size() == reference->hashes.size()) {
    int limit = std::min<int>(n_pages, static_cast<int>(reference->hashes.size()));
    if (reference->salt != out.salt) {
      // Pages before both salts chain alike; from a salt on they need its own.
      if (reference->salt) limit = std::min(limit, reference->salt->page);
      if (out.salt) limit = std::min(limit, out.salt->page);
    }
    while (same < limit && reference->hashes[same] == out.hashes[same] &&
           reference->token_crcs[same] == out.token_crcs[same] &&
           record.page_hashes(same).size() == PageHash::kSize) {
      ++same;
    }
  }
  if (same == n_pages) return out;

  // Hash the rest, chained from the accepted prefix (full pages only: a
  // partial page is always the last, so an accepted one ends the record).
  PageHashChain chain(out.model_fingerprint, out.geometry, out.start);
  chain.Adopt(std::span<const PageHash>(out.hashes).first(static_cast<size_t>(same)));
  if (out.salt && out.salt->page >= same) chain.SetSalt(*out.salt);
  chain.Extend(tokens.first(static_cast<size_t>(kv_length)));
  for (int i = same; i < full; ++i) {
    if (record.page_hashes(i).size() != PageHash::kSize || out.hashes[i] != chain.hashes()[i]) {
      if (pages_hashed != nullptr) *pages_hashed += chain.pages_hashed();
      return WrongHash(i, chain.hashes()[i]);
    }
  }
  if (full < n_pages) {
    const PageHash tail = chain.NextPageHash(
        tokens.subspan(static_cast<size_t>(full) * t, static_cast<size_t>(kv_length - full * t)));
    if (record.page_hashes(full).size() != PageHash::kSize || out.hashes[full] != tail) {
      if (pages_hashed != nullptr) *pages_hashed += chain.pages_hashed();
      return WrongHash(full, tail);
    }
  }
  if (pages_hashed != nullptr) *pages_hashed += chain.pages_hashed();
  return out;
}

}  // namespace kvs
