// Migration with tenants (API keys over TLS, the real kvsessiond): an
// imported session keeps its owner, only that tenant or an admin may import
// it (PERMISSION_DENIED, nothing written), another tenant cannot export
// it (a session or a checkpoint), FindMissingPages tells only admins which pages a server holds,
// and a tenant cannot import a record whose chain it chose (a slide's salt,
// the shared prefix pool): its pages could land under another tenant's
// page hashes.
#include <algorithm>

#include "cache/migration_stream.h"
#include "cache/page_hash.h"
#include "cache/page_hash_chain.h"
#include "cache/record_validation.h"
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

// A forged stream: acme's session, its chain restarted at page 0 from
// beta's chain start (as a slide's salt) or started from the shared pool's
// zeros, its pages re-keyed to match, so every hash checks. Imported, its
// pages (acme's bytes) would serve beta's prompts of the same text.
TEST_F(MigrationTenantTest, ATenantCannotImportASessionWhoseChainItChoseButAnAdminCan) {
  const std::string text =
      "A long enough text to fill at least one whole page of the key value cache, surely";
  absl::StatusOr<v1::Session> mine = acme_->CreateSession(text);
  ASSERT_TRUE(mine.ok()) << mine.status();
  absl::StatusOr<ExportedSession> exported = Export(*acme_, mine->id());
  ASSERT_TRUE(exported.ok()) << exported.status();
  absl::StatusOr<MigrationContents> contents = DecodeMigrationStream(exported->bytes);
  ASSERT_TRUE(contents.ok()) << contents.status();
  const SessionRecord original = *contents->session;
  ASSERT_GT(original.page_hashes_size(), 1);
  ASSERT_TRUE(acme_->DeleteSession(mine->id()).ok());

  auto forge = [&](bool salted) {
    SessionRecord r = original;
    const PageHash start = salted ? TenantChainStart("beta") : PageHash{};
    if (salted) {
      r.set_slide_salt(std::string(start.view()));
      r.set_slide_salt_page(0);
    } else {
      r.set_shared_prefix_chain(true);
    }
    const KvGeometry g = *FromGeometryRecord(r.geometry());
    PageHashChain chain(r.model_fingerprint(), g, start);
    const std::span<const int32_t> tokens(r.tokens().data(), static_cast<size_t>(r.kv_length()));
    chain.Extend(tokens);
    std::vector<PageHash> hashes(chain.hashes().begin(), chain.hashes().end());
    const size_t full = hashes.size() * static_cast<size_t>(g.page_tokens);
    if (full < tokens.size()) hashes.push_back(chain.NextPageHash(tokens.subspan(full)));
    EXPECT_EQ(static_cast<int>(hashes.size()), original.page_hashes_size());
    MigrationStreamWriter writer;
    r.clear_page_hashes();
    for (const PageHash& h : hashes) r.add_page_hashes(std::string(h.view()));
    writer.SetSession(r);
    for (int i = 0; i < original.page_hashes_size(); ++i) {
      writer.AddPage(hashes[i], contents->pages.at(*PageHash::FromBytes(original.page_hashes(i))));
    }
    return std::move(writer).Finish();
  };
  for (const bool salted : {true, false}) {
    SCOPED_TRACE(salted ? "a slide's salt" : "the shared pool's chain");
    const std::string forged = forge(salted);
    absl::StatusOr<v1::ImportSessionResponse> r = ImportSession(*acme_, forged);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();
    EXPECT_EQ(root_->GetSession(mine->id()).status().code(), absl::StatusCode::kNotFound);
    // An admin may (it is trusted with every tenant's data): the stream
    // itself is valid.
    r = ImportSession(*root_, forged);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(root_->DeleteSession(mine->id()).ok());
  }
  // The stream as exported: acme imports its own session.
  EXPECT_TRUE(ImportSession(*acme_, exported->bytes).ok());
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
