// Three real kvsessiond replicas behind a real nginx (deploy/nginx/
// kvsession-fleet.conf), on loopback: a session, its forks, checkpoints and
// restores are all served by the replica that created the session, with no
// client knowledge of the topology beyond the route header the client sets
// itself; a killed replica's sessions are UNAVAILABLE until it is back and
// then continue exactly, and the other replicas are unaffected
// (docs/fleet.md).
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "client/kvsession_client.h"
#include "gtest/gtest.h"
#include "proto/route_key.h"
#include "tests/nginx_fleet.h"
#include "tests/reference_data.h"
#include "tests/scratch_dir.h"
#include "tests/subprocess.h"

namespace kvs {
namespace {

namespace v1 = kvsession::v1;

constexpr int kReplicas = 3;

// The replica header of a finished call (initial metadata, else trailers).
std::string ReplicaHeaderOf(const grpc::ClientContext& ctx) {
  for (const auto* md : {&ctx.GetServerInitialMetadata(), &ctx.GetServerTrailingMetadata()}) {
    auto it = md->find(kReplicaHeader);
    if (it != md->end()) return std::string(it->second.data(), it->second.size());
  }
  return "";
}

bool EveryReplicaHoldsTwo(const std::map<int, std::vector<std::string>>& by_owner) {
  if (by_owner.size() < kReplicas) return false;
  for (const auto& [owner, ids] : by_owner) {
    if (ids.size() < 2) return false;
  }
  return true;
}

class FleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = SharedDir() + "/models/aidreams260K.gguf";
    if (!std::filesystem::exists(model_)) GTEST_SKIP() << "../shared absent";
    if (NginxFleet::NginxBinary().empty()) {
      GTEST_SKIP() << "nginx is not installed (tools/setup installs Debian's nginx): fleet tests skipped";
    }
    fleet_ = std::make_unique<NginxFleet>(dir_, model_);
    std::string error;
    ASSERT_TRUE(fleet_->Start(kReplicas, &error)) << error;
    proxy_ = std::make_unique<KvSessionClient>(fleet_->proxy_address());
    proxy_->OnReplica([this](const std::string& replica) { answered_by_ = replica; });
    ASSERT_TRUE(proxy_->WaitForServer(std::chrono::seconds(10)));
    for (int i = 0; i < kReplicas; ++i) {
      direct_.push_back(std::make_unique<KvSessionClient>(fleet_->replica_address(i)));
      ASSERT_TRUE(direct_[i]->WaitForServer(std::chrono::seconds(10)));
    }
  }
  void TearDown() override { fleet_.reset(); }

  static int IndexOf(const std::string& replica) {
    for (int i = 0; i < kReplicas; ++i) {
      if (NginxFleet::Name(i) == replica) return i;
    }
    return -1;
  }

  // A session created through the proxy; its owner is the replica that
  // answered.
  std::string CreateThroughProxy(const std::string& text, std::string* owner) {
    absl::StatusOr<v1::Session> s = proxy_->CreateSession(text);
    EXPECT_TRUE(s.ok()) << s.status() << "\n" << fleet_->nginx_log();
    *owner = answered_by_;
    return s.ok() ? s->id() : "";
  }

  absl::StatusOr<GenerateResult> Greedy(const std::string& session, int n) {
    v1::GenerateRequest req;
    req.set_session_id(session);
    req.set_max_tokens(n);
    req.set_ignore_eos(true);
    req.mutable_sampling()->set_temperature(0);
    return proxy_->Generate(req);
  }

  std::string model_;
  ScratchDir scratch_{"fleet_test"};
  const std::filesystem::path dir_ = scratch_.path();
  std::unique_ptr<NginxFleet> fleet_;
  std::unique_ptr<KvSessionClient> proxy_;
  std::vector<std::unique_ptr<KvSessionClient>> direct_;
  std::string answered_by_;  // the replica of the proxy client's last call
};

TEST_F(FleetTest, EveryCallOnASessionFamilyIsAnsweredByTheReplicaThatHoldsIt) {
  constexpr int kSessions = 24;
  std::set<std::string> owners;
  for (int i = 0; i < kSessions; ++i) {
    SCOPED_TRACE(i);
    std::string owner;
    const std::string id = CreateThroughProxy("Once upon a time " + std::to_string(i), &owner);
    ASSERT_FALSE(id.empty());
    const int o = IndexOf(owner);
    ASSERT_GE(o, 0) << "no replica header: '" << owner << "'";
    owners.insert(owner);
    // The proxy's key is in the id; the session is on the owner only.
    const std::string key(RouteKeyOf(id));
    ASSERT_FALSE(key.empty()) << id;
    ASSERT_TRUE(direct_[o]->GetSession(id).ok());
    EXPECT_EQ(direct_[(o + 1) % kReplicas]->GetSession(id).status().code(), absl::StatusCode::kNotFound);

    ASSERT_TRUE(Greedy(id, 4).ok());
    EXPECT_EQ(answered_by_, owner) << "Generate";

    v1::ForkRequest fork;
    fork.set_session_id(id);
    fork.set_count(2);
    absl::StatusOr<v1::ForkResponse> forks = proxy_->Fork(fork);
    ASSERT_TRUE(forks.ok()) << forks.status();
    EXPECT_EQ(answered_by_, owner) << "Fork";
    ASSERT_EQ(forks->sessions_size(), 2);
    for (const v1::Session& f : forks->sessions()) {
      EXPECT_EQ(RouteKeyOf(f.id()), key) << f.id();
      ASSERT_TRUE(Greedy(f.id(), 3).ok());
      EXPECT_EQ(answered_by_, owner) << "Generate on a fork";
    }

    absl::StatusOr<v1::Checkpoint> ckpt = proxy_->Snapshot(forks->sessions(0).id());
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    EXPECT_EQ(answered_by_, owner) << "Snapshot";
    EXPECT_EQ(RouteKeyOf(ckpt->id()), key) << ckpt->id();

    absl::StatusOr<v1::Session> restored = proxy_->RestoreCheckpoint(ckpt->id());
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_EQ(answered_by_, owner) << "Restore";
    EXPECT_EQ(RouteKeyOf(restored->id()), key) << restored->id();
    ASSERT_TRUE(Greedy(restored->id(), 3).ok());
    EXPECT_EQ(answered_by_, owner) << "Generate on a restored session";

    ASSERT_TRUE(proxy_->ListCheckpoints(forks->sessions(0).id()).ok());
    EXPECT_EQ(answered_by_, owner) << "ListCheckpoints";
    ASSERT_TRUE(proxy_->GetSession(restored->id()).ok());
    EXPECT_EQ(answered_by_, owner) << "GetSession";
  }
  // The keys spread the sessions: every replica got some.
  EXPECT_EQ(owners.size(), static_cast<size_t>(kReplicas));
  for (int i = 0; i < kReplicas; ++i) {
    absl::StatusOr<v1::ServerInfo> info = direct_[i]->GetServerInfo();
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->replica(), NginxFleet::Name(i));
  }
}

TEST_F(FleetTest, AKilledReplicasSessionsAreUnavailableUntilItIsBackThenContinueExactly) {
  // Sessions until every replica holds at least two.
  std::map<int, std::vector<std::string>> by_owner;
  for (int i = 0; i < 60 && !EveryReplicaHoldsTwo(by_owner); ++i) {
    std::string owner;
    const std::string id = CreateThroughProxy("The little robot " + std::to_string(i), &owner);
    ASSERT_FALSE(id.empty());
    by_owner[IndexOf(owner)].push_back(id);
  }
  ASSERT_EQ(by_owner.size(), static_cast<size_t>(kReplicas));
  constexpr int victim = 1;
  // What each victim session continues with, uninterrupted: its twin (a
  // fork, same tokens) generates it before the kill.
  std::map<std::string, std::vector<int32_t>> expected;
  for (const std::string& id : by_owner[victim]) {
    ASSERT_TRUE(Greedy(id, 5).ok());
    v1::ForkRequest fork;
    fork.set_session_id(id);
    fork.set_count(1);
    absl::StatusOr<v1::ForkResponse> f = proxy_->Fork(fork);
    ASSERT_TRUE(f.ok()) << f.status();
    absl::StatusOr<GenerateResult> twin = Greedy(f->sessions(0).id(), 12);
    ASSERT_TRUE(twin.ok()) << twin.status();
    expected[id] = twin->ids;
  }

  const pid_t others[] = {fleet_->replica(0).pid(), fleet_->replica(2).pid()};
  fleet_->KillReplica(victim);

  for (const std::string& id : by_owner[victim]) {
    const absl::Status down = Greedy(id, 3).status();
    EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable) << id;
    EXPECT_NE(down.message().find("replica unavailable"), std::string::npos) << down;
    EXPECT_EQ(proxy_->GetSession(id).status().code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(proxy_->Snapshot(id).status().code(), absl::StatusCode::kUnavailable);
  }
  for (int o : {0, 2}) {
    for (const std::string& id : by_owner[o]) {
      absl::StatusOr<GenerateResult> r = Greedy(id, 4);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->ids.size(), 4u);
      EXPECT_EQ(answered_by_, NginxFleet::Name(o));
    }
  }

  ASSERT_TRUE(fleet_->RestartReplica(victim)) << fleet_->replica(victim).log();
  for (const std::string& id : by_owner[victim]) {
    absl::StatusOr<GenerateResult> after = Greedy(id, 12);
    ASSERT_TRUE(after.ok()) << after.status() << "\n" << fleet_->nginx_log();
    EXPECT_EQ(answered_by_, NginxFleet::Name(victim));
    EXPECT_EQ(after->ids, expected[id]) << id;
  }
  // The other replicas never stopped.
  EXPECT_EQ(fleet_->replica(0).pid(), others[0]);
  EXPECT_EQ(fleet_->replica(2).pid(), others[1]);
  EXPECT_TRUE(fleet_->replica(0).Running());
  EXPECT_TRUE(fleet_->replica(2).Running());
}

TEST_F(FleetTest, TheCliWorksThroughTheProxyWithNothingButItsAddress) {
  const auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), BinaryPath("kvsession"));
    args.insert(args.end(), {"--server", fleet_->proxy_address()});
    ProcessResult r = RunProcess(args, dir_.string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    while (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
    return r.out;
  };
  // Without the route header a call would reach the owner 1 time in 3:
  // six families all right means the CLI sends it.
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE(i);
    const std::string id = cli({"create", "--text", "Once upon a time " + std::to_string(i)});
    ASSERT_FALSE(RouteKeyOf(id).empty()) << id;
    cli({"generate", "--session", id, "-n", "4", "--temp", "0"});
    const std::string branch = cli({"fork", "--session", id, "--count", "1"});
    EXPECT_EQ(RouteKeyOf(branch), RouteKeyOf(id)) << branch;
    const std::string checkpoint = cli({"snapshot", "--session", branch});
    const std::string restored = cli({"restore", "--checkpoint", checkpoint});
    cli({"generate", "--session", restored, "-n", "4", "--temp", "0"});
  }
}

TEST_F(FleetTest, SessionsCreatedWithTheSameClientKeyShareAReplicaAndCarryTheKey) {
  std::set<std::string> replicas;
  for (int i = 0; i < 6; ++i) {
    grpc::ClientContext ctx;
    ctx.AddMetadata(kRouteHeader, "user-42");
    v1::CreateSessionRequest req;
    v1::Session s;
    ASSERT_TRUE(proxy_->stub()->CreateSession(&ctx, req, &s).ok());
    EXPECT_EQ(s.id().rfind("ses_user-42.", 0), 0u) << s.id();
    replicas.insert(ReplicaHeaderOf(ctx));
  }
  EXPECT_EQ(replicas.size(), 1u);
}

TEST_F(FleetTest, AMalformedRouteKeyIsInvalidArgumentAndNotEchoed) {
  for (const std::string& bad : {std::string("has space"), std::string("dot.ted"), std::string(65, 'k')}) {
    grpc::ClientContext ctx;
    ctx.AddMetadata(kRouteHeader, bad);
    v1::CreateSessionRequest req;
    v1::Session s;
    const grpc::Status st = direct_[0]->stub()->CreateSession(&ctx, req, &s);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_EQ(st.error_message().find(bad), std::string::npos) << st.error_message();
    EXPECT_NE(st.error_message().find(kRouteHeader), std::string::npos) << st.error_message();
    EXPECT_EQ(ReplicaHeaderOf(ctx), NginxFleet::Name(0)) << "errors name the replica too";
  }
}

}  // namespace
}  // namespace kvs
