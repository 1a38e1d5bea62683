// The calls that make sessions under ids the server picks (CreateSession,
// Fork, Restore of a checkpoint) when the client gives up while the new
// sessions are being written: the client never learns those ids, so the
// server deletes the sessions instead of keeping them (and counting them
// against the session limit and the tenant's quota) with no one able to
// name them. The store holds its writes (FaultInjectionFileSystem::
// HoldWrites) to put the cancellation exactly there.
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "cache/fault_injection_fs.h"
#include "service/service_test_env.h"
#include "service/service_test_server.h"

namespace kvs {
namespace {

namespace v1 = kvsession::v1;

class EndedCallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KVS_REQUIRE_SHARED_MODEL();
    env_ = std::make_unique<ServiceTestEnv>(256, 16, StoreOn(fs_));
    server_ = std::make_unique<ServiceTestServer>(env_.get());
  }
  void TearDown() override {
    fs_->ReleaseWrites();
    server_.reset();
    env_.reset();
  }

  std::vector<std::string> SessionIds() {
    grpc::ClientContext ctx;
    v1::ListSessionsRequest req;
    v1::ListSessionsResponse resp;
    grpc::Status st = server_->stub().ListSessions(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    std::vector<std::string> ids;
    for (const v1::Session& s : resp.sessions()) ids.push_back(s.id());
    return ids;
  }

  // The sessions once every call has ended (the server's shutdown waits
  // for them), as a restart finds them in the store.
  std::vector<std::string> SessionsAfterARestart() {
    server_.reset();
    env_->Reopen();
    server_ = std::make_unique<ServiceTestServer>(env_.get());
    return SessionIds();
  }

  v1::Session Create(const std::string& text) {
    grpc::ClientContext ctx;
    v1::CreateSessionRequest req;
    req.mutable_input()->set_text(text);
    v1::Session s;
    grpc::Status st = server_->stub().CreateSession(&ctx, req, &s);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return s;
  }

  // Runs `call` with writes held, cancels it once one of its writes waits,
  // then lets the writes go. Returns the status the client saw. The
  // cancellation reaches the server on gRPC's own threads, not at once:
  // the writes wait a second more for it (no hook tells when it has).
  grpc::Status CancelWhileWriting(const std::function<grpc::Status(grpc::ClientContext*)>& call) {
    fs_->HoldWrites();
    grpc::ClientContext ctx;
    grpc::Status status;
    std::thread caller([&] { status = call(&ctx); });
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (fs_->held_writes() == 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_GT(fs_->held_writes(), 0) << "the call never wrote";
    ctx.TryCancel();
    caller.join();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    fs_->ReleaseWrites();
    return status;
  }

  std::shared_ptr<FaultInjectionFileSystem> fs_ = std::make_shared<FaultInjectionFileSystem>();
  std::unique_ptr<ServiceTestEnv> env_;
  std::unique_ptr<ServiceTestServer> server_;
};

TEST_F(EndedCallTest, ACreateSessionCancelledWhileItsSessionIsWrittenLeavesNoSession) {
  grpc::Status st = CancelWhileWriting([&](grpc::ClientContext* ctx) {
    v1::CreateSessionRequest req;
    req.mutable_input()->set_text("Once upon a time");  // under one page: its only writes are the persist's
    v1::Session s;
    return server_->stub().CreateSession(ctx, req, &s);
  });
  EXPECT_EQ(st.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(SessionsAfterARestart(), std::vector<std::string>{});
}

TEST_F(EndedCallTest, AForkCancelledWhileItsBranchesAreWrittenLeavesOnlyTheSource) {
  const v1::Session source = Create("Once upon a time, there was a little girl named Lily.");
  grpc::Status st = CancelWhileWriting([&](grpc::ClientContext* ctx) {
    v1::ForkRequest req;
    req.set_session_id(source.id());
    req.set_count(3);
    v1::ForkResponse resp;
    return server_->stub().Fork(ctx, req, &resp);
  });
  EXPECT_EQ(st.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(SessionsAfterARestart(), std::vector<std::string>{source.id()});
}

TEST_F(EndedCallTest, ARestoreOfACheckpointCancelledWhileItsSessionIsWrittenLeavesOnlyTheSource) {
  const v1::Session source = Create("Once upon a time, there was a little girl named Lily.");
  v1::Checkpoint checkpoint;
  {
    grpc::ClientContext ctx;
    v1::SnapshotRequest req;
    req.set_session_id(source.id());
    ASSERT_TRUE(server_->stub().Snapshot(&ctx, req, &checkpoint).ok());
  }
  grpc::Status st = CancelWhileWriting([&](grpc::ClientContext* ctx) {
    v1::RestoreRequest req;
    req.set_checkpoint_id(checkpoint.id());
    v1::Session s;
    return server_->stub().Restore(ctx, req, &s);
  });
  EXPECT_EQ(st.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(SessionsAfterARestart(), std::vector<std::string>{source.id()});
}

TEST_F(EndedCallTest, ACreateSessionWhoseWritesWereSlowButNotCancelledKeepsItsSession) {
  fs_->HoldWrites();
  v1::Session made;
  grpc::Status status;
  std::thread caller([&] {
    grpc::ClientContext ctx;
    v1::CreateSessionRequest req;
    req.mutable_input()->set_text("Once upon a time");
    status = server_->stub().CreateSession(&ctx, req, &made);
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (fs_->held_writes() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GT(fs_->held_writes(), 0) << "the call never wrote";
  fs_->ReleaseWrites();
  caller.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(SessionsAfterARestart(), std::vector<std::string>{made.id()});
}

}  // namespace
}  // namespace kvs
