// Record codec: the documented framing (docs/storage-format.md, section 3)
// and DATA_LOSS for every damaged value.
#include "cache/record_codec.h"

#include <string>
#include <string_view>

#include "cache/crc32c.h"
#include "cache/session_record.pb.h"
#include "gtest/gtest.h"
#include "proto/protobuf_log_capture_test_util.h"

namespace kvs {
namespace {

SessionRecord Record() {
  SessionRecord r;
  r.set_id("ses_1");
  r.set_model_fingerprint("model-a");
  for (int t : {1, 2, 3, 4, 5}) r.add_tokens(t);
  r.set_kv_length(4);
  (*r.mutable_labels())["user"] = "test";
  return r;
}

// A stored value framed by hand as docs/storage-format.md section 3 says:
// the payload's CRC-32C, little-endian, then the payload.
std::string Framed(std::string_view payload) {
  const uint32_t crc = Crc32c(payload.data(), payload.size());
  std::string value;
  for (int i = 0; i < 4; ++i) value.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
  value += payload;
  return value;
}

TEST(RecordCodecTest, AValueIsTheLittleEndianCrcOfTheMessageThenTheMessage) {
  const std::string message = Record().SerializeAsString();
  const std::string want = Framed(message);
  EXPECT_EQ(EncodeRecordValue(Record()), want);

  SessionRecord back;
  ASSERT_TRUE(DecodeRecordValue(want, &back).ok());
  EXPECT_EQ(back.SerializeAsString(), message);
}

TEST(RecordCodecTest, EveryDamagedValueIsDataLoss) {
  const std::string value = EncodeRecordValue(Record());
  for (size_t i = 0; i < value.size(); ++i) {
    std::string damaged = value;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x10);
    SessionRecord r;
    EXPECT_TRUE(absl::IsDataLoss(DecodeRecordValue(damaged, &r))) << "byte " << i;
  }
  for (size_t n = 0; n < value.size(); ++n) {
    SessionRecord r;
    EXPECT_TRUE(absl::IsDataLoss(DecodeRecordValue(value.substr(0, n), &r))) << "length " << n;
  }
}

// A value with a correct checksum whose message holds a string field of
// invalid UTF-8 (a record damaged before its checksum was made, or written
// by another program): DATA_LOSS naming the field, and protobuf's parser,
// which would log a line for it, never sees it.
TEST(RecordCodecTest, AStringFieldOfInvalidUtf8IsDataLossNamingTheFieldAndNothingIsLogged) {
  SessionRecord bad_owner = Record();
  bad_owner.set_owner("acme\xff");
  SessionRecord bad_label = Record();
  (*bad_label.mutable_labels())["user"] = "\xed\xa0\x80";
  CheckpointRecord bad_name;
  bad_name.set_id("ckpt_1");
  bad_name.set_name("turn \xe2\x82");
  *bad_name.mutable_session() = Record();
  // Serializing them logs (protobuf's own check); only the reading is under test.
  const std::string owner_value = EncodeRecordValue(bad_owner);
  const std::string label_value = EncodeRecordValue(bad_label);
  const std::string name_value = EncodeRecordValue(bad_name);

  ProtobufLogCapture capture;
  SessionRecord r;
  absl::Status got = DecodeRecordValue(owner_value, &r);
  EXPECT_EQ(got.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(got.message(), "the record's owner is not valid UTF-8");
  got = DecodeRecordValue(label_value, &r);
  EXPECT_EQ(got.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(got.message(), "the record's labels: a value is not valid UTF-8");
  CheckpointRecord c;
  got = DecodeRecordValue(name_value, &c);
  EXPECT_EQ(got.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(got.message(), "the record's name is not valid UTF-8");
  EXPECT_TRUE(ProtobufLogCapture::lines().empty()) << ProtobufLogCapture::lines().front();
}

// An id whose length runs past the end, its bytes so far not UTF-8: the
// parser would check (and log) the cut string before refusing the message,
// so the walk's "malformed" refuses it unparsed (the session-record
// fuzzer's finding, fuzz/regressions/session_record/).
TEST(RecordCodecTest, AStringCutShortByTheEndIsDataLossAndNothingIsLogged) {
  const std::string payload = "\x0a\x0a\x05s_cac\xff\xff";  // id: 10 bytes announced, 8 there
  const std::string value = Framed(payload);
  ProtobufLogCapture capture;
  SessionRecord r;
  const absl::Status got = DecodeRecordValue(value, &r);
  EXPECT_EQ(got.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(got.message(), "the record does not parse");
  EXPECT_TRUE(ProtobufLogCapture::lines().empty()) << ProtobufLogCapture::lines().front();
}

TEST(RecordCodecTest, APayloadThatIsNoMessageIsDataLossSayingItDoesNotParse) {
  const std::string payload = "\x0a\x7f";  // field 1, 127 bytes long, then nothing
  const std::string value = Framed(payload);
  SessionRecord r;
  const absl::Status got = DecodeRecordValue(value, &r);
  EXPECT_EQ(got.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(got.message(), "the record does not parse");
}

}  // namespace
}  // namespace kvs
