#include "cache/page_hash.h"

#include <openssl/evp.h>

#include <algorithm>

#include "absl/base/internal/raw_logging.h"

namespace kvs {
namespace {

constexpr std::string_view kDomainTag = "kvsession.page.v1";
constexpr std::string_view kSlideTag = "kvsession.slide.v1";
constexpr std::string_view kCutTag = "kvsession.cut.v1";

void AppendLe32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

void AppendLe64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

// SHA-256 with one digest context reused across the pages of a chain.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) { ABSL_RAW_CHECK(ctx_ != nullptr, "EVP_MD_CTX_new failed"); }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  // The first 16 bytes of SHA-256(message).
  PageHash Truncated(const std::string& message) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int digest_len = 0;
    const bool ok = EVP_DigestInit_ex(ctx_, Md(), nullptr) == 1 &&
                    EVP_DigestUpdate(ctx_, message.data(), message.size()) == 1 &&
                    EVP_DigestFinal_ex(ctx_, digest, &digest_len) == 1;
    ABSL_RAW_CHECK(ok && digest_len == 32, "SHA-256 failed");
    PageHash h;
    std::copy(digest, digest + PageHash::kSize, h.bytes.begin());
    return h;
  }

 private:
  // Fetched once: the implicit fetch of EVP_sha256() costs a lookup per use.
  static const EVP_MD* Md() {
    static const EVP_MD* md = [] {
      const EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
      return fetched != nullptr ? fetched : EVP_sha256();
    }();
    return md;
  }

  EVP_MD_CTX* ctx_;
};

// The hashed message of one page (docs/storage-format.md, "Page hashes").
void PageMessage(const PageHash& previous, std::string_view model_fingerprint,
                 const KvGeometry& g, std::span<const int32_t> tokens, std::string* out) {
  out->clear();
  out->append(kDomainTag);
  out->append(previous.view());
  AppendLe64(out, model_fingerprint.size());
  out->append(model_fingerprint);
  for (int field : {g.n_layers, g.n_kv_heads, g.head_dim, g.page_tokens,
                    static_cast<int>(g.dtype)}) {
    AppendLe32(out, static_cast<uint32_t>(field));
  }
  AppendLe32(out, static_cast<uint32_t>(tokens.size()));
  for (int32_t t : tokens) AppendLe32(out, static_cast<uint32_t>(t));
}

}  // namespace

std::string PageHash::hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(2 * kSize);
  for (uint8_t b : bytes) {
    s.push_back(kDigits[b >> 4]);
    s.push_back(kDigits[b & 0xF]);
  }
  return s;
}

std::optional<PageHash> PageHash::FromBytes(std::string_view b) {
  if (b.size() != kSize) return std::nullopt;
  PageHash h;
  std::copy(b.begin(), b.end(), h.bytes.begin());
  return h;
}

PageHash ChainPageHash(const PageHash& previous, std::string_view model_fingerprint,
                       const KvGeometry& geometry, std::span<const int32_t> tokens) {
  std::string message;
  PageMessage(previous, model_fingerprint, geometry, tokens, &message);
  return Sha256().Truncated(message);
}

PageHash SlideSalt(const PageHash& last_dropped, int keep_pages, int dropped_pages) {
  std::string message(kSlideTag);
  message.append(last_dropped.view());
  AppendLe32(&message, static_cast<uint32_t>(keep_pages));
  AppendLe32(&message, static_cast<uint32_t>(dropped_pages));
  return Sha256().Truncated(message);
}

PageHash CutSalt(const PageHash& salt, int length) {
  std::string message(kCutTag);
  message.append(salt.view());
  AppendLe32(&message, static_cast<uint32_t>(length));
  return Sha256().Truncated(message);
}

PageHash ChainStart(std::string_view owner, bool shared) {
  return shared ? PageHash{} : TenantChainStart(owner);
}

PageHash TenantChainStart(std::string_view owner) {
  if (owner.empty() || owner == kUnsaltedTenant) return PageHash{};
  std::string message("kvsession.tenant.v1");
  AppendLe64(&message, owner.size());
  message.append(owner);
  return Sha256().Truncated(message);
}

std::vector<PageHash> ChainPageHashes(std::string_view model_fingerprint,
                                      const KvGeometry& geometry,
                                      std::span<const int32_t> tokens, int kv_length) {
  ABSL_RAW_CHECK(geometry.page_tokens > 0, "page_tokens must be positive");
  ABSL_RAW_CHECK(kv_length >= 0 && static_cast<size_t>(kv_length) <= tokens.size(),
                 "kv_length out of range");
  const int t = geometry.page_tokens;
  std::vector<PageHash> hashes;
  hashes.reserve((kv_length + t - 1) / t);
  Sha256 sha;
  std::string message;
  PageHash previous;
  for (int begin = 0; begin < kv_length; begin += t) {
    const int n = std::min(t, kv_length - begin);
    PageMessage(previous, model_fingerprint, geometry, tokens.subspan(begin, n), &message);
    previous = sha.Truncated(message);
    hashes.push_back(previous);
  }
  return hashes;
}

}  // namespace kvs
