// kvsessiond --delete-idle-sessions-after on the real server over loopback
// gRPC: a session nobody uses goes after its TTL and not before, one in
// use stays, its checkpoint stays, the delete reaches the store, and a bad
// value stops the server at start (service/session_expiry.h).
#include <chrono>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "tests/service_fixture.h"

namespace kvs {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

class SessionExpiryServiceTest : public ServiceFixture {};

TEST_F(SessionExpiryServiceTest, AnUnusedSessionGoesAfterItsTtlWhileOneInUseAndTheCheckpointStay) {
  constexpr auto kTtl = std::chrono::seconds(2);
  StartServer("aidreams260K.gguf", {"--delete-idle-sessions-after", "2s"});
  EXPECT_THAT(server_->log(), HasSubstr("sessions unused for 2s are deleted"));
  const v1::Limits limits = client_->GetServerInfo().value().limits();
  ASSERT_TRUE(limits.has_idle_session_ttl());
  EXPECT_EQ(limits.idle_session_ttl().seconds(), 2);
  const auto created = Clock::now();
  const v1::Session idle = Create("Once upon a time there was a little dragon");
  const v1::Session used = Create("The little girl went to the park");
  absl::StatusOr<v1::Checkpoint> checkpoint = client_->Snapshot(idle.id(), "kept");
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ASSERT_TRUE(client_->GetSession(idle.id()).ok());

  // One token on `used` every 300 ms, until `idle` is gone.
  absl::StatusCode idle_code = absl::StatusCode::kOk;
  while (Clock::now() - created < std::chrono::seconds(20)) {
    Generate(used.id(), 1);
    idle_code = client_->GetSession(idle.id()).status().code();
    if (idle_code == absl::StatusCode::kNotFound) break;
    ASSERT_EQ(idle_code, absl::StatusCode::kOk);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  ASSERT_EQ(idle_code, absl::StatusCode::kNotFound) << "the unused session was never deleted";
  // The clock a client reads: `used`'s last use is its last Generate, after
  // `idle` was created.
  const v1::Session used_now = client_->GetSession(used.id()).value();
  EXPECT_GT(used_now.last_use_time().seconds() * 1000000000LL + used_now.last_use_time().nanos(),
            idle.last_use_time().seconds() * 1000000000LL + idle.last_use_time().nanos() + 1000000000LL)
      << "more than a second of Generates after the idle session's creation";
  EXPECT_GT(idle.last_use_time().seconds(), 0);
  EXPECT_GE(Clock::now() - created, kTtl) << "deleted before its TTL";
  EXPECT_TRUE(client_->GetSession(used.id()).ok()) << "a session in use stays";
  absl::StatusOr<v1::Session> restored = client_->RestoreCheckpoint(checkpoint->id());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->length(), idle.length()) << "the checkpoint holds the expired session's tokens";

  // The delete reached the store; without the flag nothing expires, however
  // long a session has been idle.
  server_->Stop();
  std::this_thread::sleep_for(kTtl);
  StartServer("aidreams260K.gguf");
  EXPECT_FALSE(client_->GetServerInfo().value().limits().has_idle_session_ttl()) << "never, without the flag";
  EXPECT_EQ(client_->GetSession(idle.id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(client_->GetSession(used.id()).ok());
  EXPECT_TRUE(client_->GetSession(restored->id()).ok());
}

// Below 1 s the sweeps would run every 100 ms for nothing a client could
// rely on; negative durations are mistakes.
TEST_F(SessionExpiryServiceTest, ATtlBelowOneSecondRefusesToStart) {
  for (const char* ttl : {"-1s", "500ms"}) {
    ServerProcess server;
    EXPECT_FALSE(server.Start(ModelPath("aidreams260K.gguf"), (dir_ / "ttl").string(),
                              {"--delete-idle-sessions-after", ttl}))
        << ttl;
    EXPECT_THAT(server.log(), HasSubstr("--delete-idle-sessions-after must be 0 (never) or at least 1s")) << ttl;
  }
}

}  // namespace
}  // namespace kvs
