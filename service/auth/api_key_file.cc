#include "service/auth/api_key_file.h"

#include <openssl/sha.h>

#include <cerrno>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kvs {
namespace {

bool ValidTenant(std::string_view t) { return IsTenantName(t); }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool ParseDigest(std::string_view hex, Sha256Digest* out) {
  if (hex.size() != 64) return false;
  for (size_t i = 0; i < 32; ++i) {
    const int hi = HexValue(hex[2 * i]), lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

absl::Status LineError(int line, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("auth keys line ", line, ": ", what));
}

}  // namespace

std::string KeysFileQuotaNameList() {
  std::string list;
  constexpr size_t kCount = std::size(kKeysFileQuotaNames);
  for (size_t i = 0; i < kCount; ++i) {
    if (i > 0) list += i + 1 == kCount ? " or " : ", ";
    list += kKeysFileQuotaNames[i];
  }
  return list;
}

size_t ApiKeyFile::tenant_count() const {
  std::set<std::string> tenants;
  for (const ApiKeyEntry& e : entries) tenants.insert(e.principal.tenant);
  return tenants.size();
}

absl::StatusOr<ApiKeyFile> ParseApiKeyFile(std::string_view text) {
  ApiKeyFile file;
  std::set<Sha256Digest> seen;
  int line_number = 0;
  for (absl::string_view split : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    std::string_view line(split.data(), split.size());
    ++line_number;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    std::vector<std::string_view> fields;
    for (absl::string_view f : absl::StrSplit(absl::string_view(line.data(), line.size()),
                                              absl::ByAnyChar(" \t\r\v\f"), absl::SkipEmpty())) {
      fields.emplace_back(f.data(), f.size());
    }
    if (fields.empty()) continue;
    if (fields.size() < 3) return LineError(line_number, "expected TENANT ROLE SHA256HEX [QUOTA=VALUE ...]");
    ApiKeyEntry entry;
    if (!ValidTenant(fields[0])) return LineError(line_number, "tenant must be 1-64 of [A-Za-z0-9_.-]");
    entry.principal.tenant = std::string(fields[0]);
    if (fields[1] == "user") {
      entry.principal.role = Role::kUser;
    } else if (fields[1] == "admin") {
      entry.principal.role = Role::kAdmin;
    } else {
      return LineError(line_number, "role must be user or admin");
    }
    if (!ParseDigest(fields[2], &entry.key_sha256)) {
      return LineError(line_number, "the key hash must be 64 lowercase hex digits (sha256sum of the key)");
    }
    if (!seen.insert(entry.key_sha256).second) return LineError(line_number, "the same key hash appears twice");
    for (size_t i = 3; i < fields.size(); ++i) {
      const size_t eq = fields[i].find('=');
      const std::string_view name = fields[i].substr(0, eq);
      bool known = false;
      for (std::string_view q : kKeysFileQuotaNames) known |= q == name;
      if (eq == std::string_view::npos || !known) {
        return LineError(line_number, absl::StrCat("field ", i + 1, ": expected NAME=N with NAME one of ",
                                                   KeysFileQuotaNameList()));
      }
      int64_t value = 0;
      const std::string_view digits = fields[i].substr(eq + 1);
      if (!absl::SimpleAtoi(absl::string_view(digits.data(), digits.size()), &value) || value < 0) {
        return LineError(line_number, std::string(name) + " must be a non-negative integer");
      }
      // Twice on one line is a slip (which would win?): refused, as the
      // same hash twice is.
      if (!entry.quotas.emplace(std::string(name), value).second) {
        return LineError(line_number, std::string(name) + " is given twice");
      }
    }
    file.entries.push_back(std::move(entry));
  }
  return file;
}

absl::StatusOr<ApiKeyFile> LoadApiKeyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    const std::string what = absl::StrCat("cannot read the auth keys file ", path);
    return err == EACCES ? absl::PermissionDeniedError(what) : absl::NotFoundError(what);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ParseApiKeyFile(text.str());
}

Sha256Digest Sha256(std::string_view data) {
  Sha256Digest d;
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), d.data());
  return d;
}

std::string Sha256Hex(std::string_view data) {
  static constexpr char kHex[] = "0123456789abcdef";
  const Sha256Digest d = Sha256(data);
  std::string out;
  for (uint8_t b : d) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

}  // namespace kvs
