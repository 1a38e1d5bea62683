// ApiKeyFile: the --auth-keys file, parsed.
//
// One entry per line: `TENANT ROLE SHA256HEX [QUOTA=VALUE ...]`,
// whitespace-separated; `#` starts a comment (to the end of the line);
// blank lines are ignored.
//   TENANT     [A-Za-z0-9_.-]{1,64}
//   ROLE       user | admin
//   SHA256HEX  the lowercase hex SHA-256 of the API key (64 characters);
//              the key itself never appears in the file
//   QUOTA      max_sessions | max_kv_bytes | max_store_bytes | max_generates
//              | max_checkpoints,
//              VALUE a non-negative integer (0 = unlimited): the tenant's
//              quota, overriding the --tenant-max-* default; with several
//              lines the most restrictive wins (tenant_quotas.h, which
//              also says what each counts; tenant_usage.h enforces them)
// A tenant may have several keys (several lines); the same hash twice, or
// the same quota twice on one line, is an error. Errors name the line number and what is wrong, never the
// line's text beyond the offending token's position.
//
// Thread safety: a parsed ApiKeyFile is immutable.
#ifndef KVSESSION_SERVICE_AUTH_API_KEY_FILE_H_
#define KVSESSION_SERVICE_AUTH_API_KEY_FILE_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "service/auth/principal.h"

namespace kvs {

using Sha256Digest = std::array<uint8_t, 32>;

// The QUOTA names a line accepts, in the order of tenant_quotas.h's Quota
// enum (tenant_quotas_test checks the two agree). Tools that read a
// refusal's "tenant quota NAME=LIMIT reached" or take a quota on their
// command line (tools/load) use this list rather than their own.
inline constexpr std::string_view kKeysFileQuotaNames[] = {"max_sessions", "max_kv_bytes", "max_store_bytes",
                                                           "max_generates", "max_checkpoints"};
// "max_sessions, max_kv_bytes, max_store_bytes, max_generates or
// max_checkpoints", for messages that list the names.
std::string KeysFileQuotaNameList();

struct ApiKeyEntry {
  Principal principal;
  Sha256Digest key_sha256{};
  std::map<std::string, int64_t> quotas;  // name -> value, as given
};

struct ApiKeyFile {
  std::vector<ApiKeyEntry> entries;
  // Distinct tenants named by the entries.
  size_t tenant_count() const;
};

// Parses the file's text. INVALID_ARGUMENT naming the line on any error.
absl::StatusOr<ApiKeyFile> ParseApiKeyFile(std::string_view text);

// Reads and parses `path`: NOT_FOUND / PERMISSION_DENIED when it cannot be
// read (naming the path), INVALID_ARGUMENT as ParseApiKeyFile.
absl::StatusOr<ApiKeyFile> LoadApiKeyFile(const std::string& path);

// SHA-256 of `data` (OpenSSL libcrypto).
Sha256Digest Sha256(std::string_view data);
// Lowercase hex of a digest (for `kvsession hash-key` style tooling and tests).
std::string Sha256Hex(std::string_view data);

}  // namespace kvs

#endif  // KVSESSION_SERVICE_AUTH_API_KEY_FILE_H_
