// SessionOwnership against a real SessionManager (model, page pool and
// RocksDB store): a tenant's ids are invisible to every other tenant, and
// another tenant's id answers exactly what an id that does not exist
// answers.
#include "service/auth/session_ownership.h"

#include <gtest/gtest.h>

#include <string>

#include "kvsession/v1/kvsession.pb.h"
#include "service/service_test_env.h"

namespace kvs {
namespace {

namespace v1 = kvsession::v1;

Principal User(const std::string& tenant) {
  Principal p;
  p.tenant = tenant;
  return p;
}

Principal Admin() {
  Principal p;
  p.tenant = "ops";
  p.role = Role::kAdmin;
  return p;
}

// The same id with its last hex digit changed: well formed, and no
// session or checkpoint has it.
std::string Missing(std::string id) {
  id.back() = id.back() == '0' ? '1' : '0';
  return id;
}

// A server stack holding one persisted session of tenant "acme" (BOS and
// 20 tokens) and a checkpoint of it.
class SessionOwnershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KVS_REQUIRE_SHARED_MODEL();
    env_ = std::make_unique<ServiceTestEnv>();
    auto s = env_->sessions().CreateAcquired(SamplingParams{}, {}, "acme");
    ASSERT_TRUE(s.ok()) << s.status();
    env_->Prefill(**s, std::vector<int32_t>(20, 11));
    ASSERT_TRUE(env_->sessions().PersistAndRelease(*s).ok());
    session_ = (*s)->id;
    int64_t written = 0;
    auto checkpoint = env_->sessions().Snapshot(session_, "turn-1", &written);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    checkpoint_ = checkpoint->id();
    ownership_ = std::make_unique<SessionOwnership>(&env_->sessions());
  }

  absl::Status Check(const Principal& caller, const google::protobuf::Message& request) const {
    return ownership_->Check(caller, request);
  }

  static v1::GenerateRequest Generate(const std::string& session_id) {
    v1::GenerateRequest r;
    r.set_session_id(session_id);
    return r;
  }
  static v1::RestoreRequest RestoreCheckpoint(const std::string& checkpoint_id) {
    v1::RestoreRequest r;
    r.set_checkpoint_id(checkpoint_id);
    return r;
  }

  std::unique_ptr<ServiceTestEnv> env_;
  std::string session_, checkpoint_;
  std::unique_ptr<SessionOwnership> ownership_;
};

TEST_F(SessionOwnershipTest, TheOwnerMayNameItsSessionAndItsCheckpoint) {
  EXPECT_TRUE(Check(User("acme"), Generate(session_)).ok());
  EXPECT_TRUE(Check(User("acme"), RestoreCheckpoint(checkpoint_)).ok());
  v1::DeleteCheckpointRequest del;
  del.set_checkpoint_id(checkpoint_);
  EXPECT_TRUE(Check(User("acme"), del).ok());
}

TEST_F(SessionOwnershipTest, AnotherTenantsSessionIsNotFoundWithTheMessageOfAMissingOne) {
  const absl::Status foreign = Check(User("globex"), Generate(session_));
  EXPECT_EQ(foreign.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(foreign.message(), "no session '" + session_ + "'");

  // An id nobody has: the same code and the same message, its own id in it.
  const std::string missing = Missing(session_);
  const absl::Status absent = Check(User("globex"), Generate(missing));
  EXPECT_EQ(absent.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(absent.message(), "no session '" + missing + "'");
  // The owner asking for the missing id is told the same.
  EXPECT_EQ(Check(User("acme"), Generate(missing)), absent);
}

TEST_F(SessionOwnershipTest, AnotherTenantsCheckpointIsNotFoundWithTheMessageOfAMissingOne) {
  const absl::Status foreign = Check(User("globex"), RestoreCheckpoint(checkpoint_));
  EXPECT_EQ(foreign.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(foreign.message(), "no checkpoint '" + checkpoint_ + "'");
  const std::string missing = Missing(checkpoint_);
  const absl::Status absent = Check(User("globex"), RestoreCheckpoint(missing));
  EXPECT_EQ(absent.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(absent.message(), "no checkpoint '" + missing + "'");
}

TEST_F(SessionOwnershipTest, EveryRequestFieldNamingASessionIsChecked) {
  // A restore of a session (the oneof's other member), a delete, a fork,
  // a snapshot and a tokenize each name the session in their own message
  // type.
  v1::RestoreRequest restore;
  restore.set_session_id(session_);
  v1::DeleteSessionRequest del;
  del.set_session_id(session_);
  v1::ForkRequest fork;
  fork.set_session_id(session_);
  v1::SnapshotRequest snapshot;
  snapshot.set_session_id(session_);
  v1::TokenizeRequest tokenize;
  tokenize.set_session_id(session_);
  for (const google::protobuf::Message* request :
       std::initializer_list<const google::protobuf::Message*>{&restore, &del, &fork, &snapshot, &tokenize}) {
    EXPECT_EQ(Check(User("globex"), *request).code(), absl::StatusCode::kNotFound)
        << request->GetTypeName();
    EXPECT_TRUE(Check(User("acme"), *request).ok()) << request->GetTypeName();
  }
}

TEST_F(SessionOwnershipTest, AnAdminMayNameAnyTenantsIds) {
  EXPECT_TRUE(Check(Admin(), Generate(session_)).ok());
  EXPECT_TRUE(Check(Admin(), RestoreCheckpoint(checkpoint_)).ok());
  // Missing ones pass too: the handler answers NOT_FOUND for them.
  EXPECT_TRUE(Check(Admin(), Generate(Missing(session_))).ok());
}

TEST_F(SessionOwnershipTest, AnAdminActingForATenantSeesOnlyThatTenants) {
  Principal acting = User("globex");
  acting.acting_admin = "ops";
  EXPECT_EQ(Check(acting, Generate(session_)).code(), absl::StatusCode::kNotFound);
  acting.tenant = "acme";
  EXPECT_TRUE(Check(acting, Generate(session_)).ok());
}

TEST_F(SessionOwnershipTest, MalformedAndEmptyIdsAreLeftToTheHandler) {
  // No such id can exist, so passing it on reveals nothing; the handler
  // answers INVALID_ARGUMENT.
  EXPECT_TRUE(Check(User("globex"), Generate("ses_not-hex")).ok());
  EXPECT_TRUE(Check(User("globex"), RestoreCheckpoint("ckpt_")).ok());
  v1::TokenizeRequest tokenize;  // no session: the model's vocabulary only
  tokenize.mutable_input()->set_text("hello");
  EXPECT_TRUE(Check(User("globex"), tokenize).ok());
}

TEST_F(SessionOwnershipTest, ListCheckpointsFiltersByAnyIdAndListsOnlyTheCallersOwn) {
  v1::ListCheckpointsRequest list;
  list.set_session_id(session_);
  EXPECT_TRUE(Check(User("globex"), list).ok());
  // What it then lists is the caller's own only.
  const std::string globex = "globex";
  EXPECT_TRUE(env_->sessions().ListCheckpoints(session_, "", 100, &globex).empty());
  const std::string acme = "acme";
  EXPECT_EQ(env_->sessions().ListCheckpoints(session_, "", 100, &acme).size(), 1u);
}

}  // namespace
}  // namespace kvs
