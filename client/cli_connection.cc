#include "client/cli_connection.h"

#include "absl/strings/str_cat.h"

namespace kvs {

const std::set<std::string>& ConnectionValueFlags() {
  static const std::set<std::string> flags = {"server", "tls-ca", "tls-cert", "tls-key", "api-key", "as-tenant"};
  return flags;
}

const std::set<std::string>& ConnectionBoolFlags() {
  static const std::set<std::string> flags = {"tls"};
  return flags;
}

absl::StatusOr<std::unique_ptr<KvSessionClient>> ConnectFromFlags(const CliArgs& args) {
  // An empty value (`--tls-ca "$CA"` with CA unset) is a mistake, not "not
  // given": taken as absent, the TLS flags would connect in plaintext and
  // send the API key over it.
  for (const std::string& flag : ConnectionValueFlags()) {
    if (args.Has(flag) && args.GetOr(flag, "").empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " was given an empty value"));
    }
  }
  absl::StatusOr<ClientSecurity> security =
      ClientSecurityFromFiles(args.GetOr("tls-ca", ""), args.GetOr("tls-cert", ""), args.GetOr("tls-key", ""),
                              args.GetOr("api-key", ""), args.Has("tls"));
  if (!security.ok()) return security.status();
  security->as_tenant = args.GetOr("as-tenant", "");
  return std::make_unique<KvSessionClient>(args.GetOr("server", "127.0.0.1:50051"), *security);
}

}  // namespace kvs
