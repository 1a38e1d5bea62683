#include "service/model_fingerprint.h"

#include <openssl/evp.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kvs {

absl::StatusOr<std::string> FingerprintFile(const std::string& path, std::stop_token stop) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return absl::InternalError("SHA-256 unavailable");
  }
  std::vector<unsigned char> buf(1 << 20);
  size_t n;
  while (true) {
    if (stop.stop_requested()) return absl::CancelledError(absl::StrCat("the hash of ", path, " was stopped"));
    if ((n = std::fread(buf.data(), 1, buf.size(), f.get())) == 0) break;
    EVP_DigestUpdate(ctx.get(), buf.data(), n);
  }
  if (std::ferror(f.get())) return absl::InternalError(absl::StrCat("cannot read ", path));
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &len);
  return std::string(reinterpret_cast<char*>(digest), len);
}

}  // namespace kvs
