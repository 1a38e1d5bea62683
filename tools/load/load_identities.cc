#include "tools/load/load_identities.h"

#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "service/auth/api_key_file.h"
#include "tests/test_certificates.h"

namespace kvs::load {
namespace {

// 32 random bytes as hex: a key nobody can guess.
std::string RandomKey(std::random_device& random) {
  std::string key;
  for (int i = 0; i < 8; ++i) absl::StrAppend(&key, absl::Hex(random(), absl::kZeroPad8));
  return key;
}

}  // namespace

absl::StatusOr<std::vector<LoadQuota>> ParseLoadQuotas(std::string_view text) {
  std::vector<LoadQuota> quotas;
  for (absl::string_view part : absl::StrSplit(absl::string_view(text.data(), text.size()), ',')) {
    // The server's own parser judges each quota, on a line like the one it will read.
    const absl::StatusOr<ApiKeyFile> line =
        ParseApiKeyFile(absl::StrCat("t user ", std::string(64, '0'), " ", std::string(part), "\n"));
    if (!line.ok() || line->entries.size() != 1 || line->entries[0].quotas.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tenant-quota must be NAME=VALUE of the keys file, several joined by commas: ", KeysFileQuotaNameList()));
    }
    const auto& [name, limit] = *line->entries[0].quotas.begin();
    if (limit <= 0) return absl::InvalidArgumentError("--tenant-quota: VALUE must be above 0 (0 is unlimited)");
    for (const LoadQuota& q : quotas) {
      if (q.name == name) return absl::InvalidArgumentError("--tenant-quota names a quota twice");
    }
    quotas.push_back({name, limit});
  }
  return quotas;
}

std::string FormatLoadQuotas(const std::vector<LoadQuota>& quotas) {
  return absl::StrJoin(quotas, ",", [](std::string* out, const LoadQuota& q) {
    absl::StrAppend(out, q.name, "=", q.limit);
  });
}

absl::StatusOr<LoadIdentities> MakeLoadIdentities(const std::string& dir, int tenants, bool tls,
                                                  const std::vector<LoadQuota>& quotas) {
  if (!quotas.empty() && tenants == 0) return absl::InvalidArgumentError("--tenant-quota needs --tenants");
  LoadIdentities ids;
  ClientSecurity transport;
  if (tls) {
    TestCertificates certs;
    if (std::string error = certs.Make(std::filesystem::path(dir) / "certs"); !error.empty()) {
      return absl::InternalError(absl::StrCat("--tls: making certificates: ", error));
    }
    // As `kvsession --tls-ca` reads it.
    absl::StatusOr<ClientSecurity> trusting_ca = ClientSecurityFromFiles(certs.path("ca.pem"), "", "", "", true);
    if (!trusting_ca.ok()) return absl::InternalError(absl::StrCat("--tls: ", trusting_ca.status().message()));
    transport = *std::move(trusting_ca);
    transport.api_key.clear();  // not $KVSESSION_API_KEY: each caller's own key, below
    ids.server_flags = {"--tls-cert", certs.path("server.pem"), "--tls-key", certs.path("server.key")};
  }
  if (tenants == 0) {
    ids.tenants.push_back({"", transport, {}});
    ids.admin = {"", transport, {}};
    return ids;
  }
  std::random_device random;
  const std::string keys_path = (std::filesystem::path(dir) / "keys.txt").string();
  std::ofstream keys(keys_path);
  keys << "# kvs-load's tenants: tenant role sha256(key)\n";
  auto add = [&](const std::string& tenant, const char* role, const std::vector<LoadQuota>& tenant_quotas) {
    Caller caller{tenant, transport, tenant_quotas};
    caller.security.api_key = RandomKey(random);
    keys << tenant << " " << role << " " << Sha256Hex(caller.security.api_key);
    for (const LoadQuota& q : tenant_quotas) keys << " " << q.name << "=" << q.limit;
    keys << "\n";
    return caller;
  };
  for (int t = 0; t < tenants; ++t) {
    ids.tenants.push_back(add(absl::StrCat("load-t", t), "user", t == 0 ? quotas : std::vector<LoadQuota>()));
  }
  ids.admin = add("load-admin", "admin", {});
  keys.close();
  if (!keys) return absl::InternalError(absl::StrCat("--tenants: could not write ", keys_path));
  ids.server_flags.insert(ids.server_flags.end(), {"--auth-keys", keys_path});
  return ids;
}

}  // namespace kvs::load
