#include "client/client_security.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <grpcpp/security/credentials.h>

namespace kvs {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot read " + flag + " " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string ApiKeyFromEnvironment() {
  const char* key = std::getenv("KVSESSION_API_KEY");
  return key == nullptr ? std::string() : std::string(key);
}

absl::StatusOr<ClientSecurity> ClientSecurityFromFiles(const std::string& ca_path, const std::string& cert_path,
                                                       const std::string& key_path, const std::string& api_key,
                                                       bool tls) {
  if (cert_path.empty() != key_path.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  ClientSecurity s;
  s.tls = tls || !ca_path.empty() || !cert_path.empty();
  s.api_key = api_key.empty() ? ApiKeyFromEnvironment() : api_key;
  if (!ca_path.empty()) {
    absl::StatusOr<std::string> ca = ReadFile(ca_path, "--tls-ca");
    if (!ca.ok()) return ca.status();
    s.root_certs_pem = *ca;
  }
  if (!cert_path.empty()) {
    absl::StatusOr<std::string> cert = ReadFile(cert_path, "--tls-cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadFile(key_path, "--tls-key");
    if (!key.ok()) return key.status();
    s.cert_chain_pem = *cert;
    s.private_key_pem = *key;
  }
  return s;
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const ClientSecurity& security) {
  if (!security.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = security.root_certs_pem;
  options.pem_cert_chain = security.cert_chain_pem;
  options.pem_private_key = security.private_key_pem;
  return grpc::SslCredentials(options);
}

}  // namespace kvs
