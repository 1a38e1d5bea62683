// Issue 8 item 6 on the real kvsessiond over loopback gRPC: requests that
// are not valid messages (invalid UTF-8 in a string field, garbage, no
// message at all) get INVALID_ARGUMENT with a short message naming the
// request type and the field, change nothing, and the server keeps serving.
// Requests are hand-built wire bytes sent with grpc::GenericStub (a
// generated stub refuses to send invalid UTF-8).
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>

#include "gmock/gmock.h"
#include "proto/wire_bytes_test_util.h"
#include "tests/raw_call.h"
#include "tests/service_fixture.h"

namespace kvs {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using wire::Len;
using wire::MapEntry;
using wire::VarintField;

class HostileRequestTest : public ServiceFixture {
 protected:
  void StartAndCreate() {
    StartServer("aidreams260K.gguf");
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    session_ = Create("I was flying");
    ASSERT_FALSE(session_.id().empty());
    checkpoint_ = client_->Snapshot(session_.id()).value().id();
  }

  RawReply Call(const std::string& method, const std::string& request) {
    return RawCall(channel_, KvSessionMethod(method), {request});
  }

  // Nothing changed: the one session (same length), its one checkpoint,
  // and the session still generates.
  void ExpectNothingChangedAndServing() {
    absl::StatusOr<std::vector<v1::Session>> all = client_->ListAllSessions();
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_EQ(all->size(), 1u);
    EXPECT_EQ((*all)[0].id(), session_.id());
    EXPECT_EQ((*all)[0].length(), session_.length());
    EXPECT_TRUE((*all)[0].labels().empty());
    absl::StatusOr<v1::ListCheckpointsResponse> cps = client_->ListCheckpoints("");
    ASSERT_TRUE(cps.ok()) << cps.status();
    ASSERT_EQ(cps->checkpoints_size(), 1);
    EXPECT_EQ(cps->checkpoints(0).id(), checkpoint_);
    EXPECT_FALSE(Generate(session_.id(), 3).ids.empty());
  }

  std::shared_ptr<grpc::Channel> channel_;
  v1::Session session_;
  std::string checkpoint_;
};

struct BadString {
  std::string method;
  std::string request;   // wire bytes
  std::string message;   // the status message expected
};

TEST_F(HostileRequestTest, InvalidUtf8InEachStringFieldIsInvalidArgumentNamingTheField) {
  StartAndCreate();
  const std::string id = session_.id();
  const std::string bad = "SECRET\xff";
  const std::string long_bad = std::string(100 * 1024, 'a') + "\xc0\xaf";
  const std::vector<BadString> cases = {
      {"Generate", Len(1, id) + Len(5, "\n") + Len(5, bad), "GenerateRequest.stop[1] is not valid UTF-8"},
      {"Generate", Len(1, "ses_" + bad), "GenerateRequest.session_id is not valid UTF-8"},
      {"Snapshot", Len(1, id) + Len(2, long_bad), "SnapshotRequest.name is not valid UTF-8"},
      {"CreateSession", MapEntry(3, bad, "v"), "CreateSessionRequest.labels: a key is not valid UTF-8"},
      {"CreateSession", Len(1, Len(1, "hi")) + MapEntry(3, "k", long_bad),
       "CreateSessionRequest.labels: a value is not valid UTF-8"},
      {"Fork", Len(1, id) + VarintField(2, 2) + MapEntry(4, "k", bad),
       "ForkRequest.labels: a value is not valid UTF-8"},
      {"Restore", Len(1, checkpoint_) + MapEntry(3, bad, "v"), "RestoreRequest.labels: a key is not valid UTF-8"},
      {"Restore", Len(1, "ckpt_" + bad), "RestoreRequest.checkpoint_id is not valid UTF-8"},
      {"Append", Len(1, long_bad) + Len(2, Len(1, "more")), "AppendRequest.session_id is not valid UTF-8"},
      {"GetSession", Len(1, bad), "GetSessionRequest.session_id is not valid UTF-8"},
      {"DeleteSession", Len(1, id + "\xff"), "DeleteSessionRequest.session_id is not valid UTF-8"},
      {"ListSessions", Len(2, bad), "ListSessionsRequest.page_token is not valid UTF-8"},
      {"ListCheckpoints", Len(1, bad), "ListCheckpointsRequest.session_id is not valid UTF-8"},
      {"DeleteCheckpoint", Len(1, checkpoint_ + "\xed\xa0\x80"),
       "DeleteCheckpointRequest.checkpoint_id is not valid UTF-8"},
  };
  for (const BadString& c : cases) {
    SCOPED_TRACE(c.message);
    const RawReply r = Call(c.method, c.request);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(r.status.error_message(), c.message);
    EXPECT_TRUE(r.messages.empty());
  }
  ExpectNothingChangedAndServing();
}

TEST_F(HostileRequestTest, EveryMethodAnswersGarbageWithInvalidArgumentNamingItsRequestType) {
  StartAndCreate();
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName("kvsession.v1.KvSession");
  ASSERT_NE(service, nullptr);
  // A varint that never ends, a group that never closes, a length past the end.
  const std::vector<std::string> garbage = {"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff garbage",
                                            "\x0b\x0b\x0b", "\x0a\x7f" "abc"};
  for (int i = 0; i < service->method_count(); ++i) {
    const google::protobuf::MethodDescriptor* m = service->method(i);
    for (const std::string& g : garbage) {
      SCOPED_TRACE(m->name());
      const RawReply r = Call(m->name(), g);
      EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << "a method added to the .proto must be listed in ParsingCallbackService";
      EXPECT_EQ(r.status.error_message(),
                "the request is not a valid " + m->input_type()->full_name() + " message");
    }
  }
  ExpectNothingChangedAndServing();
}

TEST_F(HostileRequestTest, ACallWithoutARequestMessageIsRefusedAndTheServerKeepsServing) {
  StartAndCreate();
  for (const std::string method : {"GetSession", "Generate", "DeleteSession", "CreateSession"}) {
    SCOPED_TRACE(method);
    const RawReply none = RawCall(channel_, KvSessionMethod(method), {});
    EXPECT_EQ(none.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(none.status.error_message(), "the call carried no kvsession.v1." + method + "Request message");
  }
  ExpectNothingChangedAndServing();
}

TEST_F(HostileRequestTest, AValidRequestSentAsRawBytesStillWorks) {
  StartAndCreate();
  const RawReply r = Call("GetSession", Len(1, session_.id()) + VarintField(2, 1));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_EQ(r.messages.size(), 1u);
  v1::Session got;
  ASSERT_TRUE(got.ParseFromString(r.messages[0]));
  EXPECT_EQ(got.id(), session_.id());
  EXPECT_EQ(got.token_ids_size(), session_.length());
  // Input.text is bytes: its invalid UTF-8 gets the service's own message.
  const RawReply text = Call("Append", Len(1, session_.id()) + Len(2, Len(1, "\xff")));
  EXPECT_EQ(text.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(text.status.error_message(), HasSubstr("not valid UTF-8"));
  EXPECT_THAT(text.status.error_message(), Not(HasSubstr("\xff")));
  ExpectNothingChangedAndServing();
}

}  // namespace
}  // namespace kvs
