// Per-tenant quotas against the real kvsessiond (issue 10, item 4): each
// quota refuses with RESOURCE_EXHAUSTED naming it and its value, another
// tenant is unaffected, deleting frees the quota, GetServerInfo shows the
// caller's usage, a SIGHUP reload changes the limits, and the usage is
// recounted from the store after a kill -9.
#include <signal.h>

#include <thread>

#include "gtest/gtest.h"
#include <nlohmann/json.hpp>
#include "client/migration.h"
#include "tests/running_generate.h"
#include "tests/subprocess.h"
#include "tests/secure_fixture.h"

namespace kvs {
namespace {

class TenantQuotaTest : public SecureFixture {
 protected:
  // Starts the server with `acme_quotas` on acme's key line (beta has none).
  void Start(const std::vector<std::string>& acme_quotas, const std::vector<std::string>& flags = {}) {
    std::vector<std::string> f = flags;
    f.insert(f.end(), {"--auth-keys", WriteAcmeAndBeta(acme_quotas)});
    StartRaw(f);
    acme_ = Client("", "", "acme-key");
    beta_ = Client("", "", "beta-key");
  }
  std::string WriteAcmeAndBeta(const std::vector<std::string>& acme_quotas) {
    std::vector<std::string> acme = {"acme", "user", "acme-key"};
    acme.insert(acme.end(), acme_quotas.begin(), acme_quotas.end());
    return WriteKeys({acme, {"beta", "user", "beta-key"}});
  }
  // Rewrites the keys file and waits for the server to reload it.
  void Reload(const std::vector<std::string>& acme_quotas) {
    WriteAcmeAndBeta(acme_quotas);
    ::kill(server_->pid(), SIGHUP);
    ASSERT_TRUE(WaitForLog("SIGHUP: reloaded", ++reloads_)) << server_->log();
  }

  // A session of BOS + `n` token ids starting at `first`.
  static v1::CreateSessionRequest Tokens(int first, int n) {
    v1::CreateSessionRequest r;
    for (int i = 0; i < n; ++i) r.mutable_input()->mutable_tokens()->add_ids(first + i);
    return r;
  }
  static v1::TenantInfo TenantOf(KvSessionClient& client) {
    absl::StatusOr<v1::ServerInfo> info = client.GetServerInfo();
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->tenant() : v1::TenantInfo();
  }
  static void ExpectQuotaError(const absl::Status& s, const std::string& quota) {
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_EQ(s.message(), "tenant quota " + quota + " reached") << s;
  }

  std::unique_ptr<KvSessionClient> acme_, beta_;
  size_t reloads_ = 0;
};

TEST_F(TenantQuotaTest, MaxSessionsRefusesCreateForkAndRestorePastItUntilADeleteFreesOne) {
  Start({"max_sessions=2"});
  absl::StatusOr<v1::Session> a = acme_->CreateSession("Once upon a time");
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<v1::Checkpoint> checkpoint = acme_->Snapshot(a->id(), "start");
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  v1::ForkRequest fork;
  fork.set_session_id(a->id());
  fork.set_count(2);
  // Two branches do not fit in the one free slot: none is made.
  ExpectQuotaError(acme_->Fork(fork).status(), "max_sessions=2");
  EXPECT_EQ(TenantOf(*acme_).sessions().usage(), 1);
  fork.set_count(1);
  ASSERT_TRUE(acme_->Fork(fork).ok());

  ExpectQuotaError(acme_->CreateSession("a third").status(), "max_sessions=2");
  ExpectQuotaError(acme_->RestoreCheckpoint(checkpoint->id()).status(), "max_sessions=2");
  const v1::TenantInfo info = TenantOf(*acme_);
  EXPECT_EQ(info.tenant(), "acme");
  EXPECT_EQ(info.role(), "user");
  EXPECT_EQ(info.sessions().usage(), 2);
  EXPECT_EQ(info.sessions().limit(), 2);
  EXPECT_EQ(info.generates().limit(), 0);

  // Another tenant is unaffected.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(beta_->CreateSession("beta's own").ok());
  EXPECT_EQ(TenantOf(*beta_).sessions().usage(), 3);
  EXPECT_EQ(TenantOf(*beta_).sessions().limit(), 0);

  ASSERT_TRUE(acme_->DeleteSession(a->id()).ok());
  EXPECT_TRUE(acme_->RestoreCheckpoint(checkpoint->id()).ok());
  EXPECT_EQ(TenantOf(*acme_).sessions().usage(), 2);
}

// An imported session counts against its owner's quotas as a restored one
// does: max_sessions, then max_store_bytes (the stream's size).
TEST_F(TenantQuotaTest, ImportSessionRefusesASessionPastTheOwnersQuotasAndWritesNothing) {
  Start({"max_sessions=1"});
  absl::StatusOr<v1::Session> a = acme_->CreateSession("Once upon a time, there was a little girl named Lily");
  ASSERT_TRUE(a.ok()) << a.status();
  v1::ExportSessionRequest req;
  req.set_session_id(a->id());
  absl::StatusOr<ExportedSession> stream = ExportSession(*acme_, req);
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_TRUE(acme_->DeleteSession(a->id()).ok());
  absl::StatusOr<v1::Session> b = acme_->CreateSession("another");
  ASSERT_TRUE(b.ok()) << b.status();

  ExpectQuotaError(ImportSession(*acme_, stream->bytes).status(), "max_sessions=1");
  EXPECT_EQ(acme_->GetSession(a->id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(TenantOf(*acme_).sessions().usage(), 1);

  ASSERT_TRUE(acme_->DeleteSession(b->id()).ok());
  const int64_t used = TenantOf(*acme_).store_bytes().usage();
  const std::string quota = "max_store_bytes=" + std::to_string(used + 16);
  Reload({"max_sessions=1", quota});
  ExpectQuotaError(ImportSession(*acme_, stream->bytes).status(), quota);
  EXPECT_EQ(TenantOf(*acme_).store_bytes().usage(), used);
  EXPECT_EQ(acme_->GetSession(a->id()).status().code(), absl::StatusCode::kNotFound);

  Reload({"max_sessions=1"});
  ASSERT_TRUE(ImportSession(*acme_, stream->bytes).ok());
  EXPECT_EQ(TenantOf(*acme_).sessions().usage(), 1);
}

TEST_F(TenantQuotaTest, MaxCheckpointsRefusesSnapshotsAndCheckpointImportsPastItUntilOneIsDeleted) {
  Start({"max_checkpoints=2"});
  absl::StatusOr<v1::Session> a = acme_->CreateSession("Once upon a time");
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<v1::Checkpoint> first = acme_->Snapshot(a->id(), "one");
  ASSERT_TRUE(first.ok()) << first.status();
  v1::ExportSessionRequest req;
  req.set_checkpoint_id(first->id());
  absl::StatusOr<ExportedSession> stream = ExportSession(*acme_, req);
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_TRUE(acme_->DeleteCheckpoint(first->id()).ok());
  ASSERT_TRUE(acme_->Snapshot(a->id(), "two").ok());
  absl::StatusOr<v1::Checkpoint> three = acme_->Snapshot(a->id(), "three");
  ASSERT_TRUE(three.ok()) << three.status();

  ExpectQuotaError(acme_->Snapshot(a->id(), "four").status(), "max_checkpoints=2");
  ExpectQuotaError(ImportSession(*acme_, stream->bytes).status(), "max_checkpoints=2");
  const v1::TenantInfo info = TenantOf(*acme_);
  EXPECT_EQ(info.checkpoints().usage(), 2);
  EXPECT_EQ(info.checkpoints().limit(), 2);
  absl::StatusOr<v1::ListCheckpointsResponse> listed = acme_->ListCheckpoints("");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->checkpoints_size(), 2) << "the refused calls made none";
  // Another tenant has its own count.
  absl::StatusOr<v1::Session> b = beta_->CreateSession("beta");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(beta_->Snapshot(b->id(), "").ok());

  ASSERT_TRUE(acme_->DeleteCheckpoint(three->id()).ok());
  EXPECT_EQ(TenantOf(*acme_).checkpoints().usage(), 1);
  absl::StatusOr<v1::ImportSessionResponse> imported = ImportSession(*acme_, stream->bytes);
  ASSERT_TRUE(imported.ok()) << imported.status();
  ExpectQuotaError(acme_->Snapshot(a->id(), "four").status(), "max_checkpoints=2");
}

TEST_F(TenantQuotaTest, KvsessionInfoShowsTheCallersTenantAndItsQuotas) {
  Start({"max_sessions=5"}, {"--tenant-max-generates", "2"});
  ASSERT_TRUE(acme_->CreateSession("one").ok());
  const ProcessResult r = RunProcess(
      {BinaryPath("kvsession"), "info", "--json", "--server", server_->address(), "--api-key", "acme-key"},
      dir_.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json tenant = nlohmann::json::parse(r.out)["tenant"];
  EXPECT_EQ(tenant["tenant"], "acme");
  EXPECT_EQ(tenant["role"], "user");
  EXPECT_EQ(tenant["sessions"]["usage"], "1");  // int64 is a JSON string
  EXPECT_EQ(tenant["sessions"]["limit"], "5");
  EXPECT_EQ(tenant["generates"]["limit"], "2");
}

TEST_F(TenantQuotaTest, SighupReloadChangesATenantsQuota) {
  Start({"max_sessions=1"});
  ASSERT_TRUE(acme_->CreateSession("one").ok());
  ExpectQuotaError(acme_->CreateSession("two").status(), "max_sessions=1");
  Reload({"max_sessions=3"});
  EXPECT_EQ(TenantOf(*acme_).sessions().limit(), 3);
  EXPECT_TRUE(acme_->CreateSession("two").ok());
  Reload({});  // no quota on the line: the flag default (unlimited)
  EXPECT_EQ(TenantOf(*acme_).sessions().limit(), 0);
}

TEST_F(TenantQuotaTest, FlagDefaultsApplyToEveryTenantAndTheKeysFileOverridesThem) {
  Start({"max_sessions=2"}, {"--tenant-max-sessions", "1"});
  EXPECT_EQ(TenantOf(*beta_).sessions().limit(), 1);
  EXPECT_EQ(TenantOf(*acme_).sessions().limit(), 2);
  ASSERT_TRUE(beta_->CreateSession("one").ok());
  ExpectQuotaError(beta_->CreateSession("two").status(), "max_sessions=1");
}

TEST_F(TenantQuotaTest, MaxGeneratesRefusesASecondConcurrentGenerateOrAppendOfTheTenant) {
  Start({"max_generates=1"});
  absl::StatusOr<v1::Session> a = acme_->CreateSession("Once upon a time");
  absl::StatusOr<v1::Session> b = acme_->CreateSession("There was a dog");
  ASSERT_TRUE(a.ok() && b.ok());
  v1::GenerateRequest r;
  r.set_session_id(a->id());
  r.set_max_tokens(4096);
  r.set_ignore_eos(true);
  r.set_context_policy(v1::CONTEXT_POLICY_SLIDE);  // runs until cancelled
  // Ends CANCELLED when the test stops it; only its start matters here.
  RunningGenerate running(*acme_, r);
  ASSERT_TRUE(running.WaitStarted()) << "the first Generate did not start";
  EXPECT_EQ(TenantOf(*acme_).generates().usage(), 1);
  v1::GenerateRequest other;
  other.set_session_id(b->id());
  other.set_max_tokens(2);
  ExpectQuotaError(acme_->Generate(other).status(), "max_generates=1");
  ExpectQuotaError(acme_->Append(b->id(), " and a cat").status(), "max_generates=1");
  // The refused calls changed nothing.
  absl::StatusOr<v1::Session> b_now = acme_->GetSession(b->id(), false, false);
  ASSERT_TRUE(b_now.ok());
  EXPECT_EQ(b_now->length(), b->length());
  // Another tenant is unaffected.
  absl::StatusOr<v1::Session> c = beta_->CreateSession("beta");
  ASSERT_TRUE(c.ok());
  other.set_session_id(c->id());
  EXPECT_TRUE(beta_->Generate(other).ok());
  running.Stop();
  // The cancelled call gives its slot back once its job has ended.
  for (int i = 0; i < 2000 && TenantOf(*acme_).generates().usage() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  other.set_session_id(b->id());
  EXPECT_TRUE(acme_->Generate(other).ok());
  EXPECT_EQ(TenantOf(*acme_).generates().usage(), 0);
}

// A Generate whose client does not read stops at --max-unsent-stream-kb
// (generate_reactor.h) but holds its unsent tokens until the client reads
// or leaves: it keeps its generates slot until then, so a tenant cannot
// park more such streams than its quota. A stream that is read gives its
// slot back when its job ends (the test above).
TEST_F(TenantQuotaTest, AGenerateStreamItsClientDoesNotReadKeepsItsGeneratesSlotUntilItIsRead) {
  Start({"max_generates=1"}, {"--max-unsent-stream-kb", "1"});
  absl::StatusOr<v1::Session> a = acme_->CreateSession("Once upon a time");
  absl::StatusOr<v1::Session> b = acme_->CreateSession("There was a dog");
  ASSERT_TRUE(a.ok() && b.ok());
  v1::GenerateRequest unread;
  unread.set_session_id(a->id());
  unread.set_max_tokens(100);
  unread.set_ignore_eos(true);
  unread.set_top_logprobs(20);  // a few hundred bytes a token
  // A small stream window (no BDP probing) stops the server's writes after
  // a few KiB that the client does not read.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  auto stub = v1::KvSession::NewStub(
      grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer acme-key");
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader = stub->Generate(&ctx, unread);
  // Its job ends while nothing is read.
  absl::StatusOr<v1::Session> a_now;
  for (int i = 0; i < 3000; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    a_now = acme_->GetSession(a->id(), false, false);
    ASSERT_TRUE(a_now.ok()) << a_now.status();
    if (a_now->state() == v1::SESSION_STATE_IDLE && a_now->length() > a->length()) break;
  }
  ASSERT_EQ(a_now->state(), v1::SESSION_STATE_IDLE) << "the unread Generate never stopped";
  ASSERT_LT(a_now->length(), a->length() + 100) << "the unread Generate was not stopped";

  EXPECT_EQ(TenantOf(*acme_).generates().usage(), 1);
  v1::GenerateRequest other;
  other.set_session_id(b->id());
  other.set_max_tokens(2);
  ExpectQuotaError(acme_->Generate(other).status(), "max_generates=1");

  v1::GenerateResponse m;
  while (reader->Read(&m)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // The slot comes back when the stream ends (the server's side of it may
  // end a moment after the client saw its status).
  for (int i = 0; i < 1000 && TenantOf(*acme_).generates().usage() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(TenantOf(*acme_).generates().usage(), 0);
  EXPECT_TRUE(acme_->Generate(other).ok());
}

TEST_F(TenantQuotaTest, MaxKvBytesRefusesAJobPastItAfterEvictingTheTenantsOwnIdleSessions) {
  Start({});
  absl::StatusOr<v1::ServerInfo> server = acme_->GetServerInfo();
  ASSERT_TRUE(server.ok());
  const int64_t page_bytes = server->kv_cache().page_bytes();
  const int t = server->kv_cache().page_tokens();
  Reload({"max_kv_bytes=" + std::to_string(3 * page_bytes)});
  // BOS + 4t tokens need 5 pages: refused, and no session is left behind.
  ExpectQuotaError(acme_->CreateSession(Tokens(10, 4 * t)).status(),
                   "max_kv_bytes=" + std::to_string(3 * page_bytes));
  EXPECT_EQ(TenantOf(*acme_).sessions().usage(), 0);
  // One page, then three: the first session's KV is evicted to make room.
  absl::StatusOr<v1::Session> small = acme_->CreateSession(Tokens(10, 3));
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(TenantOf(*acme_).kv_bytes().usage(), page_bytes);
  absl::StatusOr<v1::Session> big = acme_->CreateSession(Tokens(100, 3 * t - 2));
  ASSERT_TRUE(big.ok()) << big.status();
  absl::StatusOr<v1::Session> small_now = acme_->GetSession(small->id(), false, false);
  ASSERT_TRUE(small_now.ok());
  EXPECT_FALSE(small_now->resident());
  EXPECT_EQ(TenantOf(*acme_).kv_bytes().usage(), 3 * page_bytes);
  EXPECT_EQ(TenantOf(*acme_).kv_bytes().limit(), 3 * page_bytes);
  // A Generate that could grow past the quota is refused; the session is unchanged.
  v1::GenerateRequest g;
  g.set_session_id(big->id());
  g.set_max_tokens(2 * t);
  ExpectQuotaError(acme_->Generate(g).status(), "max_kv_bytes=" + std::to_string(3 * page_bytes));
  EXPECT_EQ(acme_->GetSession(big->id(), false, false)->length(), big->length());
  // Another tenant is unaffected.
  EXPECT_TRUE(beta_->CreateSession(Tokens(10, 4 * t)).ok());
}

TEST_F(TenantQuotaTest, MaxStoreBytesRefusesWritesPastItBeforeWritingAndDeletingFreesIt) {
  Start({});
  absl::StatusOr<v1::Session> a = acme_->CreateSession("Once upon a time, there was a little girl named Lily");
  ASSERT_TRUE(a.ok()) << a.status();
  const int64_t used = TenantOf(*acme_).store_bytes().usage();
  EXPECT_GT(used, 0);
  EXPECT_EQ(TenantOf(*beta_).store_bytes().usage(), 0);
  const std::string quota = "max_store_bytes=" + std::to_string(used + 16);
  Reload({quota});
  ASSERT_EQ(TenantOf(*acme_).store_bytes().limit(), used + 16) << server_->log();
  ASSERT_EQ(TenantOf(*acme_).store_bytes().usage(), used);

  ExpectQuotaError(acme_->Snapshot(a->id(), "checkpoint").status(), quota);
  v1::ForkRequest fork;
  fork.set_session_id(a->id());
  fork.set_count(1);
  ExpectQuotaError(acme_->Fork(fork).status(), quota);
  v1::GenerateRequest g;
  g.set_session_id(a->id());
  g.set_max_tokens(8);
  ExpectQuotaError(acme_->Generate(g).status(), quota);
  ExpectQuotaError(acme_->CreateSession("another one").status(), quota);
  // Nothing was written: the session and the usage are as they were.
  EXPECT_EQ(acme_->GetSession(a->id(), false, false)->length(), a->length());
  absl::StatusOr<v1::ListCheckpointsResponse> checkpoints = acme_->ListCheckpoints(a->id());
  ASSERT_TRUE(checkpoints.ok());
  EXPECT_EQ(checkpoints->checkpoints_size(), 0);
  const v1::TenantInfo info = TenantOf(*acme_);
  EXPECT_EQ(info.store_bytes().usage(), used);
  EXPECT_EQ(info.store_bytes().limit(), used + 16);
  EXPECT_EQ(info.sessions().usage(), 1);

  // Another tenant is unaffected.
  absl::StatusOr<v1::Session> b = beta_->CreateSession("Once upon a time, there was a little girl named Lily");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(beta_->Snapshot(b->id(), "checkpoint").ok());

  ASSERT_TRUE(acme_->DeleteSession(a->id()).ok());
  EXPECT_EQ(TenantOf(*acme_).store_bytes().usage(), 0);
  EXPECT_TRUE(acme_->CreateSession("a new one").ok());
}

// The usage a quota is checked against is recounted from the store at
// start-up: a kill -9 and a restart give no tenant a fresh allowance, and
// what the tenant had acknowledged before the kill is what it counts.
TEST_F(TenantQuotaTest, AKilledAndRestartedServerCountsTheSameUsageSoEveryQuotaStillHolds) {
  const std::vector<std::string> quotas = {"max_sessions=2", "max_checkpoints=1"};
  Start(quotas);
  absl::StatusOr<v1::Session> a = acme_->CreateSession("Once upon a time, there was a little girl named Lily");
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<v1::Session> b = acme_->CreateSession("She liked to play in the park");
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(acme_->Snapshot(a->id(), "start").ok());
  ASSERT_TRUE(beta_->CreateSession("beta's own").ok());
  const v1::TenantInfo before = TenantOf(*acme_);
  ASSERT_EQ(before.sessions().usage(), 2);
  ASSERT_EQ(before.checkpoints().usage(), 1);
  ASSERT_GT(before.store_bytes().usage(), 0);
  const int64_t beta_store = TenantOf(*beta_).store_bytes().usage();

  server_->Kill();
  const std::string store_quota = "max_store_bytes=" + std::to_string(before.store_bytes().usage() + 16);
  Start({quotas[0], quotas[1], store_quota});
  const v1::TenantInfo after = TenantOf(*acme_);
  EXPECT_EQ(after.sessions().usage(), 2);
  EXPECT_EQ(after.checkpoints().usage(), 1);
  EXPECT_EQ(after.store_bytes().usage(), before.store_bytes().usage());
  EXPECT_EQ(after.kv_bytes().usage(), 0) << "no session's KV is loaded until it is used";
  EXPECT_EQ(TenantOf(*beta_).store_bytes().usage(), beta_store);
  EXPECT_EQ(TenantOf(*beta_).sessions().usage(), 1);

  ExpectQuotaError(acme_->CreateSession("a third").status(), "max_sessions=2");
  ExpectQuotaError(acme_->Snapshot(b->id(), "second").status(), "max_checkpoints=1");
  v1::GenerateRequest g;
  g.set_session_id(b->id());
  g.set_max_tokens(8);
  ExpectQuotaError(acme_->Generate(g).status(), store_quota);
  EXPECT_EQ(acme_->GetSession(b->id(), false, false)->length(), b->length());

  // Deleting frees what the recount counted.
  ASSERT_TRUE(acme_->DeleteSession(b->id()).ok());
  EXPECT_EQ(TenantOf(*acme_).sessions().usage(), 1);
  EXPECT_LT(TenantOf(*acme_).store_bytes().usage(), before.store_bytes().usage());
  Reload(quotas);
  absl::StatusOr<v1::Session> c = acme_->CreateSession("a new one");
  EXPECT_TRUE(c.ok()) << c.status();
  ExpectQuotaError(acme_->CreateSession("a fourth").status(), "max_sessions=2");
}

}  // namespace
}  // namespace kvs
