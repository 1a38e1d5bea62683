// Migration with tenants (API keys over TLS, the real kvsessiond): an
// imported session keeps its owner, only that tenant or an admin may import
// it (PERMISSION_DENIED, nothing written), another tenant cannot export
// it (a session or a checkpoint), and FindMissingPages tells only admins which pages a server holds.
#include <algorithm>

#include "client/migration.h"
#include "gtest/gtest.h"
#include "tests/secure_fixture.h"

namespace kvs {
namespace {

class MigrationTenantTest : public SecureFixture {
 protected:
  void SetUp() override {
    SecureFixture::SetUp();
    if (IsSkipped()) return;
    std::vector<std::string> flags = TlsFlags();
    flags.insert(flags.end(), {"--auth-keys", WriteKeys({{"acme", "user", "acme-key"},
                                                         {"beta", "user", "beta-key"},
                                                         {"root", "admin", "root-key"}})});
    StartRaw(flags);
    acme_ = Client("ca.pem", "", "acme-key");
    beta_ = Client("ca.pem", "", "beta-key");
    root_ = Client("ca.pem", "", "root-key");
  }

  static absl::StatusOr<ExportedSession> Export(KvSessionClient& c, const std::string& id,
                                                bool hashes_only = false) {
    v1::ExportSessionRequest req;
    req.set_session_id(id);
    req.set_page_hashes_only(hashes_only);
    return ExportSession(c, req);
  }

  std::unique_ptr<KvSessionClient> acme_, beta_, root_;
};

TEST_F(MigrationTenantTest, OnlyTheOwnerOrAnAdminMayImportASessionAndItKeepsItsOwner) {
  absl::StatusOr<v1::Session> mine = acme_->CreateSession("Acme's private plans for the spring");
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(Export(*beta_, mine->id()).status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<v1::Checkpoint> ckpt = acme_->Snapshot(mine->id());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  v1::ExportSessionRequest theirs;
  theirs.set_checkpoint_id(ckpt->id());
  absl::Status foreign = ExportSession(*beta_, theirs).status();
  EXPECT_EQ(foreign.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(foreign.message(), "no checkpoint '" + ckpt->id() + "'");
  EXPECT_TRUE(ExportSession(*root_, theirs).ok());
  absl::StatusOr<ExportedSession> stream = Export(*acme_, mine->id());
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_TRUE(acme_->DeleteSession(mine->id()).ok());

  absl::StatusOr<v1::ImportSessionResponse> r = ImportSession(*beta_, stream->bytes);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();
  EXPECT_EQ(root_->GetSession(mine->id()).status().code(), absl::StatusCode::kNotFound);

  r = ImportSession(*root_, stream->bytes);  // an admin moves it: still acme's
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(acme_->GetSession(mine->id()).ok());
  EXPECT_EQ(beta_->GetSession(mine->id()).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(acme_->DeleteSession(mine->id()).ok());
  r = ImportSession(*acme_, stream->bytes);  // and the owner may too
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(acme_->Append(mine->id(), " and summer").ok());
}

TEST_F(MigrationTenantTest, FindMissingPagesTellsOnlyAdminsWhichPagesTheServerHolds) {
  absl::StatusOr<v1::Session> mine = acme_->CreateSession(
      "A long enough text to fill at least one whole page of the key value cache, surely");
  ASSERT_TRUE(mine.ok()) << mine.status();
  absl::StatusOr<ExportedSession> hashes = Export(*acme_, mine->id(), /*hashes_only=*/true);
  ASSERT_TRUE(hashes.ok()) << hashes.status();
  EXPECT_TRUE(hashes->bytes.empty());
  const std::vector<std::string> all(hashes->first.page_hashes().begin(), hashes->first.page_hashes().end());
  ASSERT_FALSE(all.empty());
  absl::StatusOr<std::vector<std::string>> admin = FindMissingPages(*root_, all);
  ASSERT_TRUE(admin.ok()) << admin.status();
  EXPECT_TRUE(admin->empty());
  for (KvSessionClient* user : {acme_.get(), beta_.get()}) {
    absl::StatusOr<std::vector<std::string>> answer = FindMissingPages(*user, all);
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(*answer, all);
  }
  EXPECT_EQ(FindMissingPages(*root_, {"short"}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvs
