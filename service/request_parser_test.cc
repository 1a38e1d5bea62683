#include "service/request_parser.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvsession/v1/kvsession.pb.h"
#include "proto/wire_bytes_test_util.h"

namespace kvs {
namespace {

namespace v1 = kvsession::v1;
using ::testing::HasSubstr;
using ::testing::Not;
using wire::Len;
using wire::MapEntry;

grpc::ByteBuffer Buffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// A buffer of several slices, as gRPC hands over a large request.
grpc::ByteBuffer Slices(const std::string& bytes) {
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i < bytes.size(); i += 3) slices.emplace_back(bytes.substr(i, 3));
  return grpc::ByteBuffer(slices.data(), slices.size());
}

TEST(RequestParserTest, AValidRequestParsesWhateverItsSlices) {
  v1::GenerateRequest want;
  want.set_session_id("ses_1");
  want.add_stop("\xe2\x82\xac");
  want.mutable_input()->set_text(std::string(1000, 'x'));
  grpc::ByteBuffer one = Buffer(want.SerializeAsString());
  grpc::ByteBuffer many = Slices(want.SerializeAsString());
  v1::GenerateRequest got;
  ASSERT_TRUE(ParseRequest(&one, &got).ok());
  EXPECT_EQ(got.SerializeAsString(), want.SerializeAsString());
  got.Clear();
  ASSERT_TRUE(ParseRequest(&many, &got).ok());
  EXPECT_EQ(got.SerializeAsString(), want.SerializeAsString());
}

TEST(RequestParserTest, InvalidUtf8IsInvalidArgumentNamingTypeAndFieldWithoutEchoingIt) {
  grpc::ByteBuffer bytes = Slices(MapEntry(3, "SECRET\xff", "v"));
  v1::CreateSessionRequest request;
  request.mutable_input()->set_text("stale");
  const absl::Status s = ParseRequest(&bytes, &request);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "CreateSessionRequest.labels: a key is not valid UTF-8");
  EXPECT_FALSE(request.has_input()) << "nothing of the request is left";
}

TEST(RequestParserTest, GarbageIsInvalidArgumentNamingTheType) {
  grpc::ByteBuffer bytes = Buffer("\xff\xff\xff\xff garbage");
  v1::ForkRequest request;
  const absl::Status s = ParseRequest(&bytes, &request);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "the request is not a valid kvsession.v1.ForkRequest message");
  EXPECT_THAT(std::string(s.message()), Not(HasSubstr("garbage")));
}

TEST(RequestParserTest, ATruncatedRequestIsInvalidArgument) {
  v1::SnapshotRequest want;
  want.set_session_id("ses_1");
  want.set_name("a name");
  const std::string full = want.SerializeAsString();
  grpc::ByteBuffer bytes = Buffer(full.substr(0, full.size() - 2));
  v1::SnapshotRequest got;
  EXPECT_EQ(ParseRequest(&bytes, &got).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RequestParserTest, NoMessageAtAllIsInvalidArgument) {
  grpc::ByteBuffer none;
  v1::GetServerInfoRequest request;
  const absl::Status s = ParseRequest(&none, &request);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("kvsession.v1.GetServerInfoRequest"));
}

// gRPC releases the buffer after deserializing without freeing it: the
// parse must free it (a leak of every request otherwise; the fuzzer's
// first finding).
TEST(RequestParserTest, ParsingFreesTheRequestBytesWhateverTheOutcome) {
  for (const std::string& bytes : {std::string("\x0a\x03ses"), std::string("\xff\xff"),
                                   wire::Len(1, "\xff")}) {
    grpc::Slice slice(bytes);
    grpc::ByteBuffer buffer(&slice, 1);
    ASSERT_TRUE(buffer.Valid());
    v1::GetSessionRequest request;
    (void)ParseRequest(&buffer, &request);
    EXPECT_FALSE(buffer.Valid()) << "the buffer still holds the request";
  }
}

TEST(RequestParserTest, AnEmptyMessageIsTheDefaultRequest) {
  grpc::ByteBuffer bytes = Buffer("");
  v1::ListSessionsRequest request;
  EXPECT_TRUE(ParseRequest(&bytes, &request).ok());
}

}  // namespace
}  // namespace kvs
