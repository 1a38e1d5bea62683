// kvsessiond's connection limits against the real binary over real sockets
// (service/transport_options.h, docs/operations.md "Connections"): streams
// per connection, vanished clients found by keepalive pings, and the
// connection age that makes clients reconnect.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "gtest/gtest.h"
#include "tests/secure_fixture.h"
#include "tests/subprocess.h"

namespace kvs {
namespace {

using Clock = std::chrono::steady_clock;

class TransportLimitsTest : public SecureFixture {
 protected:
  // A channel whose streams get a small window (no BDP probing), so a
  // Generate it does not read stops the server's writes after a few KiB.
  std::shared_ptr<grpc::Channel> SmallWindowChannel() const {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
    return grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(), args);
  }
  static v1::GenerateRequest ManyTokens(const std::string& session, int n) {
    v1::GenerateRequest r;
    r.set_session_id(session);
    r.set_max_tokens(n);
    r.set_ignore_eos(true);
    r.set_top_logprobs(20);  // a few hundred bytes a token
    return r;
  }
  // Waits (up to 30 s) until `session`'s Generate has run and stopped:
  // idle, and longer than `length`.
  static bool WaitGenerated(KvSessionClient& client, const std::string& session, int length) {
    for (int i = 0; i < 3000; ++i) {
      absl::StatusOr<v1::Session> now = client.GetSession(session, false, false);
      if (now.ok() && now->state() == v1::SESSION_STATE_IDLE && now->length() > length) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // The local ports of this machine's established TCP connections to the
  // server (/proc/net/tcp and tcp6): in a test whose only client is one channel,
  // that channel's connection.
  std::set<int> ClientPorts() const {
    const std::string address = server_->address();
    const int server_port = std::stoi(address.substr(address.rfind(':') + 1));
    std::set<int> ports;
    // gRPC's sockets are dual-stack: IPv4 peers show in tcp6 too.
    for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
      std::ifstream tcp(table);
      std::string line;
      std::getline(tcp, line);  // the header
      while (std::getline(tcp, line)) {
        std::istringstream fields(line);
        std::string slot, local, remote, state;
        fields >> slot >> local >> remote >> state;
        const auto port = [](const std::string& a) { return std::stoi(a.substr(a.find(':') + 1), nullptr, 16); };
        if (state == "01" && port(remote) == server_port) ports.insert(port(local));
      }
    }
    return ports;
  }
  static int64_t GeneratesInUse(KvSessionClient& client) {
    absl::StatusOr<v1::ServerInfo> info = client.GetServerInfo();
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->tenant().generates().usage() : -1;
  }
};

// Two unread Generate streams fill a connection allowed two: its next call
// waits in the client (here until its deadline), another connection is
// served at once, and the waiting call goes through when a stream ends.
TEST_F(TransportLimitsTest, AConnectionsCallPastMaxConcurrentStreamsWaitsForOneToEndWhileOtherConnectionsGoOn) {
  StartRaw({"--max-concurrent-streams", "2"});
  std::unique_ptr<KvSessionClient> other = Client("");
  absl::StatusOr<v1::Session> a = other->CreateSession("Once upon a time");
  absl::StatusOr<v1::Session> b = other->CreateSession("There was a dog");
  ASSERT_TRUE(a.ok() && b.ok());

  auto stub = v1::KvSession::NewStub(SmallWindowChannel());
  grpc::ClientContext first, second;
  auto first_reader = stub->Generate(&first, ManyTokens(a->id(), 300));
  auto second_reader = stub->Generate(&second, ManyTokens(b->id(), 300));
  ASSERT_TRUE(WaitGenerated(*other, a->id(), a->length()));
  ASSERT_TRUE(WaitGenerated(*other, b->id(), b->length()));

  v1::GetSessionRequest get;
  get.set_session_id(a->id());
  v1::Session got;
  {
    grpc::ClientContext third;
    third.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    const grpc::Status st = stub->GetSession(&third, get, &got);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << "a third stream was opened";
  }
  const auto before = Clock::now();
  EXPECT_TRUE(other->GetSession(a->id(), false, false).ok());
  EXPECT_LT(Clock::now() - before, std::chrono::seconds(1)) << "another connection waited too";

  first.TryCancel();
  grpc::ClientContext third;
  third.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  const grpc::Status st = stub->GetSession(&third, get, &got);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(got.id(), a->id());
}

// A client that stalls but is alive keeps its unread stream; one that
// vanishes (SIGSTOP: it answers no pings) is disconnected within the
// keepalive time and timeout, and its stream's tenant slot comes back.
TEST_F(TransportLimitsTest, AClientThatStopsAnsweringPingsIsDisconnectedAndItsUnreadStreamGivesBackItsSlot) {
  StartRaw({"--auth-keys", WriteKeys({{"acme", "user", "acme-key", "max_generates=1"}}),
            "--max-unsent-stream-kb", "1", "--keepalive-time-ms", "300", "--keepalive-timeout-ms", "11000"});
  std::unique_ptr<KvSessionClient> acme = Client("", "", "acme-key");
  absl::StatusOr<v1::Session> a = acme->CreateSession("Once upon a time");
  absl::StatusOr<v1::Session> b = acme->CreateSession("There was a dog");
  ASSERT_TRUE(a.ok() && b.ok());

  ChildProcess unread;
  const std::string out = (dir_ / "unread.out").string();
  ASSERT_TRUE(unread.Start({BinaryPath("kvs-unread-generate"), server_->address(), a->id(), "acme-key", "300"}, out,
                           (dir_ / "unread.err").string()));
  ASSERT_TRUE(WaitGenerated(*acme, a->id(), a->length())) << ReadFile(out);
  ASSERT_EQ(GeneratesInUse(*acme), 1) << "the unread stream did not keep its slot";

  // Alive: its transport answers the server's pings, so it keeps its
  // stream however long it does not read. (A sync client that makes no
  // call answers from gRPC's backup poller, every 5 s: the timeout is
  // above that, as the default 20 s is.)
  std::this_thread::sleep_for(std::chrono::seconds(13));
  EXPECT_EQ(GeneratesInUse(*acme), 1) << "a live client that does not read was disconnected";

  unread.Signal(SIGSTOP);
  const auto stopped = Clock::now();
  while (GeneratesInUse(*acme) != 0 && Clock::now() - stopped < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(GeneratesInUse(*acme), 0) << "the vanished client's stream still holds its slot";
  EXPECT_LT(Clock::now() - stopped, std::chrono::seconds(20));
  v1::GenerateRequest next;
  next.set_session_id(b->id());
  next.set_max_tokens(4);
  EXPECT_TRUE(acme->Generate(next).ok());
  unread.Signal(SIGCONT);
}

// Past its age a connection gets GOAWAY: the stream running then ends
// whole within the grace, the channel drops the old connection, and the
// next call goes over a new one.
TEST_F(TransportLimitsTest, AConnectionPastItsMaxAgeIsReplacedAndTheStreamRunningThenEndsWhole) {
  StartRaw({"--max-connection-age-ms", "1000", "--max-connection-age-grace-ms", "20000"});
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  auto stub = v1::KvSession::NewStub(channel);
  v1::CreateSessionRequest create;
  create.mutable_input()->set_text("Once upon a time");
  v1::Session s;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->CreateSession(&ctx, create, &s).ok());
  }
  const std::set<int> first_ports = ClientPorts();
  ASSERT_EQ(first_ports.size(), 1u) << "one connection";
  // A stream open well past the age: read only after 2.5 s.
  v1::GenerateRequest req;
  req.set_session_id(s.id());
  req.set_max_tokens(100);
  req.set_ignore_eos(true);
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, req);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  int tokens = 0;
  v1::GenerateResponse m;
  while (reader->Read(&m)) tokens += m.token_ids_size();
  const grpc::Status st = reader->Finish();
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(tokens, 100);

  // The old connection goes once its stream has ended.
  // (WaitForStateChange polls the channel: a sync client that makes no
  // call reads its socket only when something polls.)
  if (channel->GetState(false) == GRPC_CHANNEL_READY) {
    EXPECT_TRUE(channel->WaitForStateChange(GRPC_CHANNEL_READY,
                                            std::chrono::system_clock::now() + std::chrono::seconds(5)))
        << "the connection outlived its age";
  }
  v1::GetSessionRequest get;
  get.set_session_id(s.id());
  v1::Session got;
  grpc::ClientContext again;
  EXPECT_TRUE(stub->GetSession(&again, get, &got).ok());
  EXPECT_EQ(got.length(), s.length() + 100);
  std::set<int> new_ports = ClientPorts();
  for (int p : first_ports) new_ports.erase(p);
  EXPECT_EQ(new_ports.size(), 1u) << "the call after the age did not come over a new connection";
}

}  // namespace
}  // namespace kvs
