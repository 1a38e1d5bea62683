// Two tenants over TLS against the real kvsessiond (issue 10, items 2-3):
// every RPC naming the other tenant's session or checkpoint answers as for
// an id that does not exist, lists show only the caller's own, an admin
// sees everyone's, forks and restores keep the owner, and ownership
// survives a restart.
#include <grpcpp/grpcpp.h>

#include <functional>

#include "gtest/gtest.h"
#include "tests/secure_fixture.h"

namespace kvs {
namespace {

constexpr char kUnknownSession[] = "ses_00000000000000000000000000000000";
constexpr char kUnknownCheckpoint[] = "ckpt_00000000000000000000000000000000";

class TenantIsolationTest : public SecureFixture {
 protected:
  void StartTwoTenants() {
    std::vector<std::string> flags = TlsFlags();
    flags.insert(flags.end(), {"--auth-keys", WriteKeys({{"acme", "user", "acme-key"},
                                                         {"beta", "user", "beta-key"},
                                                         {"root", "admin", "root-key"}})});
    StartRaw(flags);
    acme_ = Client("ca.pem", "", "acme-key");
    beta_ = Client("ca.pem", "", "beta-key");
    root_ = Client("ca.pem", "", "root-key");
  }

  static std::vector<std::string> Ids(const absl::StatusOr<std::vector<v1::Session>>& sessions) {
    std::vector<std::string> ids;
    EXPECT_TRUE(sessions.ok()) << sessions.status();
    if (sessions.ok()) {
      for (const v1::Session& s : *sessions) ids.push_back(s.id());
    }
    std::sort(ids.begin(), ids.end());
    return ids;
  }

  std::unique_ptr<KvSessionClient> acme_, beta_, root_;
};

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

TEST_F(TenantIsolationTest, EveryRpcNamingAnotherTenantsSessionOrCheckpointIsNotFoundAsForAnUnknownId) {
  StartTwoTenants();
  absl::StatusOr<v1::Session> mine = acme_->CreateSession("Once upon a time, there was a little girl");
  ASSERT_TRUE(mine.ok()) << mine.status();
  absl::StatusOr<v1::Checkpoint> checkpoint = acme_->Snapshot(mine->id(), "before");
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();

  KvSessionClient& beta = *beta_;
  const std::vector<std::pair<std::string, std::function<absl::Status(const std::string&)>>> session_rpcs = {
      {"Append", [&](const std::string& id) { return beta.Append(id, " and a dog").status(); }},
      {"Generate",
       [&](const std::string& id) {
         v1::GenerateRequest r;
         r.set_session_id(id);
         r.set_max_tokens(2);
         return beta.Generate(r).status();
       }},
      {"Fork",
       [&](const std::string& id) {
         v1::ForkRequest r;
         r.set_session_id(id);
         r.set_count(1);
         return beta.Fork(r).status();
       }},
      {"Snapshot", [&](const std::string& id) { return beta.Snapshot(id, "mine now").status(); }},
      {"Restore(session)", [&](const std::string& id) { return beta.RestoreSession(id).status(); }},
      {"GetSession", [&](const std::string& id) { return beta.GetSession(id, true, true).status(); }},
      {"Truncate", [&](const std::string& id) { return beta.Truncate(id, 2).status(); }},
      {"Tokenize",
       [&](const std::string& id) {
         grpc::ClientContext ctx;
         beta.PrepareContext(&ctx);
         v1::TokenizeRequest r;
         r.set_session_id(id);
         r.mutable_input()->set_text(" more");
         v1::TokenizeResponse resp;
         return FromGrpc(beta.stub()->Tokenize(&ctx, r, &resp));
       }},
      {"DeleteSession", [&](const std::string& id) { return beta.DeleteSession(id); }},
  };
  for (const auto& [name, rpc] : session_rpcs) {
    const absl::Status unknown = rpc(kUnknownSession);
    const absl::Status foreign = rpc(mine->id());
    EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound) << name << ": " << unknown;
    EXPECT_EQ(foreign.code(), unknown.code()) << name << ": " << foreign;
    EXPECT_EQ(Replace(std::string(foreign.message()), mine->id(), kUnknownSession), unknown.message()) << name;
  }
  const std::vector<std::pair<std::string, std::function<absl::Status(const std::string&)>>> checkpoint_rpcs = {
      {"Restore(checkpoint)", [&](const std::string& id) { return beta.RestoreCheckpoint(id).status(); }},
      {"DeleteCheckpoint", [&](const std::string& id) { return beta.DeleteCheckpoint(id); }},
  };
  for (const auto& [name, rpc] : checkpoint_rpcs) {
    const absl::Status unknown = rpc(kUnknownCheckpoint);
    const absl::Status foreign = rpc(checkpoint->id());
    EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound) << name << ": " << unknown;
    EXPECT_EQ(foreign.code(), unknown.code()) << name << ": " << foreign;
    EXPECT_EQ(Replace(std::string(foreign.message()), checkpoint->id(), kUnknownCheckpoint), unknown.message())
        << name;
  }
  // Listing the other tenant's session's checkpoints shows what an unknown
  // session's shows: nothing.
  absl::StatusOr<v1::ListCheckpointsResponse> listed = beta.ListCheckpoints(mine->id());
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->checkpoints_size(), 0);

  // Nothing of acme's changed, and acme still uses both.
  absl::StatusOr<v1::Session> after = acme_->GetSession(mine->id());
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->length(), mine->length());
  listed = acme_->ListCheckpoints(mine->id());
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->checkpoints_size(), 1);
  EXPECT_TRUE(acme_->RestoreCheckpoint(checkpoint->id()).ok());
}

TEST_F(TenantIsolationTest, ListsShowOnlyTheCallersOwnAndAnAdminSeesEveryone) {
  StartTwoTenants();
  absl::StatusOr<v1::Session> a1 = acme_->CreateSession("One");
  absl::StatusOr<v1::Session> a2 = acme_->CreateSession("Two");
  absl::StatusOr<v1::Session> b1 = beta_->CreateSession("Three");
  ASSERT_TRUE(a1.ok() && a2.ok() && b1.ok());
  ASSERT_TRUE(acme_->Snapshot(a1->id()).ok());
  std::vector<std::string> acme_ids = {a1->id(), a2->id()};
  std::sort(acme_ids.begin(), acme_ids.end());
  EXPECT_EQ(Ids(acme_->ListAllSessions()), acme_ids);
  EXPECT_EQ(Ids(beta_->ListAllSessions()), std::vector<std::string>{b1->id()});
  EXPECT_EQ(Ids(root_->ListAllSessions()).size(), 3u);

  absl::StatusOr<v1::ListCheckpointsResponse> c = beta_->ListCheckpoints("");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->checkpoints_size(), 0);
  c = acme_->ListCheckpoints("");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->checkpoints_size(), 1);
  c = root_->ListCheckpoints("");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->checkpoints_size(), 1);
}

TEST_F(TenantIsolationTest, ForksAndRestoresBelongToTheSourcesTenantEvenWhenAnAdminMakesThem) {
  StartTwoTenants();
  absl::StatusOr<v1::Session> mine = acme_->CreateSession("Once upon a time");
  ASSERT_TRUE(mine.ok());
  v1::ForkRequest fork;
  fork.set_session_id(mine->id());
  fork.set_count(2);
  absl::StatusOr<v1::ForkResponse> branches = acme_->Fork(fork);
  ASSERT_TRUE(branches.ok()) << branches.status();
  absl::StatusOr<v1::Checkpoint> checkpoint = root_->Snapshot(mine->id());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  absl::StatusOr<v1::Session> restored = root_->RestoreCheckpoint(checkpoint->id());
  ASSERT_TRUE(restored.ok()) << restored.status();

  const std::vector<std::string> acme_ids = Ids(acme_->ListAllSessions());
  EXPECT_EQ(acme_ids.size(), 4u);
  for (const std::string& id : {branches->sessions(0).id(), branches->sessions(1).id(), restored->id()}) {
    EXPECT_TRUE(std::count(acme_ids.begin(), acme_ids.end(), id)) << id;
    EXPECT_EQ(beta_->GetSession(id).status().code(), absl::StatusCode::kNotFound);
  }
  EXPECT_TRUE(Ids(beta_->ListAllSessions()).empty());
}

// The probe of issue 10: after its owner deleted a session, another
// tenant appending the identical text must not find it in the prefix cache.
TEST_F(TenantIsolationTest, AnotherTenantsIdenticalTextIsNeverACacheHitButTheSameTenantsIs) {
  StartTwoTenants();
  const std::string text =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park "
      "with her friends, and every day she brought a red ball and a blue kite.";
  auto append = [&](KvSessionClient& client) -> int {
    absl::StatusOr<v1::Session> s = client.CreateSession(v1::CreateSessionRequest());
    EXPECT_TRUE(s.ok()) << s.status();
    absl::StatusOr<v1::AppendResponse> r = client.Append(s->id(), text);
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_GT(r->usage().prompt_tokens(), 48);  // several 16-token pages
    return r.ok() ? r->usage().cached_tokens() : -1;
  };
  absl::StatusOr<v1::Session> first = acme_->CreateSession(v1::CreateSessionRequest());
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(acme_->Append(first->id(), text).ok());
  ASSERT_TRUE(acme_->DeleteSession(first->id()).ok());
  EXPECT_EQ(append(*beta_), 0);
  EXPECT_GT(append(*acme_), 0);
  EXPECT_GT(append(*beta_), 0);  // beta's own earlier text now is
}

TEST_F(TenantIsolationTest, OwnershipSurvivesARestartAndSessionsMadeWithoutKeysBelongToTheDefaultTenant) {
  StartRaw({});
  absl::StatusOr<v1::Session> old = Client("")->CreateSession("Made before keys");
  ASSERT_TRUE(old.ok());
  ASSERT_EQ(server_->Stop(), 0);
  StartTwoTenants();
  absl::StatusOr<v1::Session> mine = acme_->CreateSession("Made by acme");
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(server_->Stop(), 0);

  std::vector<std::string> flags = TlsFlags();
  flags.insert(flags.end(), {"--auth-keys", WriteKeys({{"acme", "user", "acme-key"},
                                                       {"beta", "user", "beta-key"},
                                                       {"default", "user", "legacy-key"}})});
  StartRaw(flags);
  EXPECT_EQ(Ids(Client("ca.pem", "", "acme-key")->ListAllSessions()), std::vector<std::string>{mine->id()});
  EXPECT_EQ(Ids(Client("ca.pem", "", "legacy-key")->ListAllSessions()), std::vector<std::string>{old->id()});
  EXPECT_EQ(Client("ca.pem", "", "beta-key")->GetSession(mine->id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Client("ca.pem", "", "legacy-key")->Append(old->id(), " and after").ok());
}

}  // namespace
}  // namespace kvs
