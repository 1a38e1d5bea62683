#include "proto/utf8_field_finder.h"

#include <string>
#include <vector>

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "kvsession/v1/kvsession.pb.h"
#include "proto/wire_bytes_test_util.h"

namespace kvs {
namespace {

namespace v1 = kvsession::v1;
using wire::Len;
using wire::MapEntry;
using wire::VarintField;

// Byte sequences protobuf's parser rejects in a string field.
const std::vector<std::string>& InvalidUtf8() {
  static const std::vector<std::string> kBad = {
      "\xff",                       // never valid
      "ok\x80",                     // a lone continuation byte
      "\xc0\xaf",                   // overlong '/'
      "\xed\xa0\x80",               // a UTF-16 surrogate
      "\xf4\x90\x80\x80",           // above U+10FFFF
      "cut \xe2\x82",               // a truncated character
  };
  return kBad;
}

template <class M>
std::optional<std::string> Find(const std::string& bytes) {
  return FindInvalidUtf8Field(*M::descriptor(), bytes);
}

// The walk must agree with the parser: whatever it names, protobuf refuses.
template <class M>
void ExpectParserRejects(const std::string& bytes) {
  M m;
  EXPECT_FALSE(m.ParseFromString(bytes)) << "protobuf accepted what the walk rejected";
}

TEST(Utf8FieldFinderTest, ValidMessagesOfEveryShapeHaveNoBadField) {
  v1::GenerateRequest g;
  g.set_session_id("ses_0123");
  g.mutable_input()->set_text("h\xc3\xa9llo \xf0\x9f\x98\x80");
  g.add_stop("\n\n");
  g.add_stop("\xe2\x82\xac");
  g.mutable_sampling()->set_temperature(0.5f);
  EXPECT_EQ(Find<v1::GenerateRequest>(g.SerializeAsString()), std::nullopt);
  v1::ForkResponse f;
  for (int i = 0; i < 3; ++i) (*f.add_sessions()->mutable_labels())["k\xc3\xa9"] = "v";
  EXPECT_EQ(Find<v1::ForkResponse>(f.SerializeAsString()), std::nullopt);
  EXPECT_EQ(Find<v1::GetServerInfoRequest>(""), std::nullopt);
}

TEST(Utf8FieldFinderTest, NamesATopLevelStringField) {
  for (const std::string& bad : InvalidUtf8()) {
    const std::string bytes = Len(1, bad) + VarintField(2, 1);
    EXPECT_EQ(Find<v1::GetSessionRequest>(bytes), "session_id is not valid UTF-8");
    ExpectParserRejects<v1::GetSessionRequest>(bytes);
  }
  EXPECT_EQ(Find<v1::SnapshotRequest>(Len(1, "ses_1") + Len(2, "\xff")), "name is not valid UTF-8");
  EXPECT_EQ(Find<v1::RestoreRequest>(Len(1, "ckpt_\xff")), "checkpoint_id is not valid UTF-8");
}

TEST(Utf8FieldFinderTest, NamesTheIndexOfARepeatedString) {
  const std::string bytes = Len(1, "ses_1") + Len(5, "fine") + Len(5, "\n") + Len(5, "bad\xff");
  EXPECT_EQ(Find<v1::GenerateRequest>(bytes), "stop[2] is not valid UTF-8");
  ExpectParserRejects<v1::GenerateRequest>(bytes);
}

TEST(Utf8FieldFinderTest, SaysWhetherAMapKeyOrValueIsBad) {
  const std::string bad_key = MapEntry(3, "a", "b") + MapEntry(3, "k\xc0\xaf", "v");
  EXPECT_EQ(Find<v1::CreateSessionRequest>(bad_key), "labels: a key is not valid UTF-8");
  ExpectParserRejects<v1::CreateSessionRequest>(bad_key);
  const std::string bad_value = Len(1, Len(1, "text")) + MapEntry(3, "k", "\xed\xa0\x80");
  EXPECT_EQ(Find<v1::CreateSessionRequest>(bad_value), "labels: a value is not valid UTF-8");
  ExpectParserRejects<v1::CreateSessionRequest>(bad_value);
  // Value before key, as a client may write them.
  const std::string swapped = Len(4, Len(2, "\xff") + Len(1, "k"));
  EXPECT_EQ(Find<v1::ForkRequest>(swapped), "labels: a value is not valid UTF-8");
}

TEST(Utf8FieldFinderTest, GivesTheDottedPathIntoSubMessages) {
  std::string sessions = Len(1, Len(1, "ses_a"));                       // sessions[0]
  sessions += Len(1, Len(1, "ses_b") + MapEntry(4, "k", "v\xff"));       // sessions[1]
  EXPECT_EQ(Find<v1::ForkResponse>(sessions), "sessions[1].labels: a value is not valid UTF-8");
  ExpectParserRejects<v1::ForkResponse>(sessions);
  const std::string checkpoint = Len(1, Len(3, "\xff"));
  EXPECT_EQ(Find<v1::ListCheckpointsResponse>(checkpoint), "checkpoints[0].name is not valid UTF-8");
}

TEST(Utf8FieldFinderTest, BytesFieldsUnknownFieldsAndOtherWireTypesAreNotChecked) {
  // Input.text is `bytes`: the server checks its UTF-8 itself, with its own message.
  const std::string text = Len(1, "ses_1") + Len(2, Len(1, "\xff\xfe"));
  EXPECT_EQ(Find<v1::AppendRequest>(text), std::nullopt);
  v1::AppendRequest append;
  EXPECT_TRUE(append.ParseFromString(text));
  // Field 99 is unknown; field 1 as a varint is kept as an unknown field.
  const std::string unknown = Len(99, "\xff") + VarintField(1, 7);
  EXPECT_EQ(Find<v1::GetSessionRequest>(unknown), std::nullopt);
  v1::GetSessionRequest get;
  EXPECT_TRUE(get.ParseFromString(unknown));
}

// Whatever the walk calls malformed, protobuf's parser refuses too (so the
// service can refuse it without parsing).
TEST(Utf8FieldFinderTest, WhatTheWalkCallsMalformedTheParserRefuses) {
  const std::vector<std::string> malformed = {
      "\x0a\x24ses_\xd3SS",                        // a string cut short (bad UTF-8 in it)
      "\x0a\x05" "ab",                                  // a string cut short
      "\x10\xff\xff",                               // a varint cut short
      "\x12\x05\x0a\x09short",                     // a sub-message's string past its end
      "\x0c",                                         // an end group with no start
      "\x0f\x00",                                    // wire type 7
  };
  for (const std::string& bytes : malformed) {
    google::protobuf::io::ArrayInputStream input(bytes.data(), static_cast<int>(bytes.size()));
    const StringFieldWalk walk = WalkStringFields(*v1::GenerateRequest::descriptor(), &input);
    EXPECT_TRUE(walk.malformed) << absl::CHexEscape(bytes);
    v1::GenerateRequest m;
    EXPECT_FALSE(m.ParseFromString(bytes)) << absl::CHexEscape(bytes);
  }
  v1::GenerateRequest valid;
  valid.set_session_id("ses_1");
  valid.add_stop("x");
  const std::string bytes = valid.SerializeAsString();
  google::protobuf::io::ArrayInputStream input(bytes.data(), static_cast<int>(bytes.size()));
  EXPECT_FALSE(WalkStringFields(*v1::GenerateRequest::descriptor(), &input).malformed);
}

TEST(Utf8FieldFinderTest, MalformedBytesBeforeABadStringAreLeftToTheParser) {
  EXPECT_EQ(Find<v1::GetSessionRequest>("\x0a\x05" "ab"), std::nullopt);          // length past the end
  EXPECT_EQ(Find<v1::GetSessionRequest>("\xff\xff\xff\xff\xff\xff"), std::nullopt);  // a bad tag
  EXPECT_EQ(Find<v1::GenerateRequest>(Len(2, "\x0a\x09short") + Len(1, "\xff")), std::nullopt);
  // Deep nesting of unknown groups stops at the recursion limit, no crash.
  std::string groups;
  for (int i = 0; i < 100000; ++i) groups += "\x9b\x06";  // start group 99
  EXPECT_EQ(Find<v1::GetSessionRequest>(groups), std::nullopt);
}

}  // namespace
}  // namespace kvs
