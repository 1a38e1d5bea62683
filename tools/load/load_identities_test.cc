// The keys file MakeLoadIdentities writes, read back by the server's own
// parser (service/auth/api_key_file.h), and --tenant-quota's parsing.
#include "tools/load/load_identities.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "service/auth/api_key_file.h"
#include "tests/scratch_dir.h"

namespace kvs::load {
namespace {

ApiKeyFile ReadKeysFile(const LoadIdentities& ids) {
  for (size_t i = 0; i + 1 < ids.server_flags.size(); ++i) {
    if (ids.server_flags[i] != "--auth-keys") continue;
    absl::StatusOr<ApiKeyFile> keys = LoadApiKeyFile(ids.server_flags[i + 1]);
    EXPECT_TRUE(keys.ok()) << keys.status();
    return keys.ok() ? *keys : ApiKeyFile();
  }
  ADD_FAILURE() << "no --auth-keys flag";
  return {};
}

TEST(LoadIdentities, EachTenantAndTheAdminGetAKeyWhoseHashTheServerReads) {
  ScratchDir dir("load_identities_test");
  absl::StatusOr<LoadIdentities> ids = MakeLoadIdentities(dir.string(), 3, /*tls=*/false);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_EQ(ids->tenants.size(), 3u);
  const ApiKeyFile keys = ReadKeysFile(*ids);
  ASSERT_EQ(keys.entries.size(), 4u);
  for (size_t t = 0; t < 3; ++t) {
    EXPECT_EQ(keys.entries[t].principal.tenant, ids->tenants[t].tenant);
    EXPECT_EQ(keys.entries[t].key_sha256, Sha256(ids->tenants[t].security.api_key));
    EXPECT_TRUE(keys.entries[t].quotas.empty());
    EXPECT_TRUE(ids->tenants[t].quotas.empty());
  }
  EXPECT_EQ(keys.entries[3].key_sha256, Sha256(ids->admin.security.api_key));
  EXPECT_NE(ids->tenants[0].security.api_key, ids->tenants[1].security.api_key);
}

TEST(LoadIdentities, TenantQuotasAreTheFirstTenantsAlone) {
  ScratchDir dir("load_identities_test");
  absl::StatusOr<std::vector<LoadQuota>> quotas = ParseLoadQuotas("max_sessions=3,max_store_bytes=9000");
  ASSERT_TRUE(quotas.ok()) << quotas.status();
  absl::StatusOr<LoadIdentities> ids = MakeLoadIdentities(dir.string(), 2, /*tls=*/false, *quotas);
  ASSERT_TRUE(ids.ok()) << ids.status();
  const ApiKeyFile keys = ReadKeysFile(*ids);
  ASSERT_EQ(keys.entries.size(), 3u);
  EXPECT_EQ(keys.entries[0].principal.tenant, "load-t0");
  EXPECT_EQ(keys.entries[0].quotas,
            (std::map<std::string, int64_t>{{"max_sessions", 3}, {"max_store_bytes", 9000}}));
  EXPECT_TRUE(keys.entries[1].quotas.empty());
  EXPECT_TRUE(keys.entries[2].quotas.empty());
  ASSERT_EQ(ids->tenants[0].quotas.size(), 2u);
  EXPECT_EQ(ids->tenants[0].quotas[0].limit, 3);
  EXPECT_EQ(ids->tenants[0].quotas[1].limit, 9000);
  EXPECT_TRUE(ids->tenants[1].quotas.empty());
}

TEST(LoadIdentities, AQuotaWithoutTenantsIsRefused) {
  ScratchDir dir("load_identities_test");
  EXPECT_EQ(MakeLoadIdentities(dir.string(), 0, false, {{"max_sessions", 1}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LoadQuotaParsing, TakesEachQuotaOfTheKeysFile) {
  for (const char* name : {"max_sessions", "max_kv_bytes", "max_store_bytes", "max_generates", "max_checkpoints"}) {
    absl::StatusOr<std::vector<LoadQuota>> q = ParseLoadQuotas(std::string(name) + "=7");
    ASSERT_TRUE(q.ok()) << name << ": " << q.status();
    ASSERT_EQ(q->size(), 1u);
    EXPECT_EQ((*q)[0].name, name);
    EXPECT_EQ((*q)[0].limit, 7);
  }
}

TEST(LoadQuotaParsing, TakesSeveralQuotasJoinedByCommasInTheirOrderAndFormatsThemBack) {
  absl::StatusOr<std::vector<LoadQuota>> q = ParseLoadQuotas("max_store_bytes=300000,max_sessions=4");
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->size(), 2u);
  EXPECT_EQ((*q)[0].name, "max_store_bytes");
  EXPECT_EQ((*q)[1].name, "max_sessions");
  EXPECT_EQ((*q)[1].limit, 4);
  EXPECT_EQ(FormatLoadQuotas(*q), "max_store_bytes=300000,max_sessions=4");
}

TEST(LoadQuotaParsing, RefusesUnknownNamesZeroSpacesEmptyPartsAndAQuotaNamedTwice) {
  for (const char* text : {"max_tokens=3", "max_sessions", "max_sessions=0", "max_sessions=-1", "max_sessions=x",
                           "max_sessions=1 max_generates=2", "", "a b", "max_sessions=1,", ",max_sessions=1",
                           "max_sessions=1,,max_generates=2", "max_sessions=1,max_sessions=2",
                           "max_sessions=1,max_tokens=2"}) {
    EXPECT_EQ(ParseLoadQuotas(text).status().code(), absl::StatusCode::kInvalidArgument) << "'" << text << "'";
  }
}

}  // namespace
}  // namespace kvs::load
