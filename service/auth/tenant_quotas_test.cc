#include "service/auth/tenant_quotas.h"

#include <gtest/gtest.h>

#include <iterator>
#include <string_view>

namespace kvs {
namespace {

ApiKeyFile Parse(const std::string& text) {
  absl::StatusOr<ApiKeyFile> f = ParseApiKeyFile(text);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? *f : ApiKeyFile{};
}

std::string Line(const std::string& tenant, const std::string& key, const std::string& quotas = "") {
  return tenant + " user " + Sha256Hex(key) + " " + quotas + "\n";
}

TEST(TenantQuotas, TheKeysFileOverridesTheFlagDefaultsForItsTenantOnly) {
  const QuotaLimits defaults{10, 1000, 5000, 2};
  TenantQuotas q(defaults, Parse(Line("acme", "k1", "max_sessions=3 max_generates=0") + Line("beta", "k2")));
  EXPECT_EQ(q.Limits("acme").max_sessions, 3);
  EXPECT_EQ(q.Limits("acme").max_generates, 0) << "0 on the line: unlimited";
  EXPECT_EQ(q.Limits("acme").max_kv_bytes, 1000) << "not on the line: the default";
  EXPECT_EQ(q.Limits("beta").max_sessions, 10);
  EXPECT_EQ(q.Limits("unnamed").max_store_bytes, 5000);
  EXPECT_EQ(q.Tenants(), (std::vector<std::string>{"acme", "beta"}));
}

TEST(TenantQuotas, EveryQuotaIsReadFromAKeyLineUnderItsName) {
  int64_t value = 3;
  std::string quotas;
  for (Quota q : kAllQuotas) quotas += std::string(QuotaName(q)) + "=" + std::to_string(value++) + " ";
  TenantQuotas q(QuotaLimits{}, Parse(Line("acme", "k1", quotas)));
  value = 3;
  for (Quota quota : kAllQuotas) EXPECT_EQ(q.Limits("acme").get(quota), value++) << QuotaName(quota);
  EXPECT_EQ(QuotaName(Quota::kCheckpoints), std::string("max_checkpoints"));
}

TEST(TenantQuotas, EachQuotaIsNamedAsTheKeysFileListsItInTheSameOrder) {
  ASSERT_EQ(std::size(kAllQuotas), std::size(kKeysFileQuotaNames));
  for (size_t i = 0; i < std::size(kAllQuotas); ++i) {
    EXPECT_EQ(std::string_view(QuotaName(kAllQuotas[i])), kKeysFileQuotaNames[i]);
  }
  EXPECT_EQ(KeysFileQuotaNameList(), "max_sessions, max_kv_bytes, max_store_bytes, max_generates or max_checkpoints");
}

TEST(TenantQuotas, WhenATenantsLinesDisagreeTheMostRestrictiveValueWins) {
  TenantQuotas q(QuotaLimits{}, Parse(Line("acme", "k1", "max_sessions=5 max_kv_bytes=0 max_generates=0") +
                                      Line("acme", "k2", "max_sessions=3 max_kv_bytes=4096 max_generates=0") +
                                      Line("acme", "k3")));
  EXPECT_EQ(q.Limits("acme").max_sessions, 3);
  EXPECT_EQ(q.Limits("acme").max_kv_bytes, 4096) << "0 (unlimited) is the least restrictive";
  EXPECT_EQ(q.Limits("acme").max_generates, 0);
}

TEST(TenantQuotas, UpdateReplacesEveryTenantsLimits) {
  TenantQuotas q(QuotaLimits{}, Parse(Line("acme", "k1", "max_sessions=5")));
  q.Update(Parse(Line("beta", "k2", "max_sessions=7")));
  EXPECT_EQ(q.Limits("acme").max_sessions, 0);
  EXPECT_EQ(q.Limits("beta").max_sessions, 7);
  EXPECT_EQ(q.Tenants(), (std::vector<std::string>{"beta"}));
}

TEST(TenantQuotas, QuotaExceededIsResourceExhaustedNamingTheQuotaAndItsLimit) {
  const absl::Status s = QuotaExceeded(Quota::kStoreBytes, 1048576);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "tenant quota max_store_bytes=1048576 reached");
}

}  // namespace
}  // namespace kvs
