// Record codec: the documented framing (docs/storage-format.md, section 3)
// and DATA_LOSS for every damaged value.
#include "cache/record_codec.h"

#include "cache/crc32c.h"
#include "cache/session_record.pb.h"
#include "gtest/gtest.h"

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

TEST(RecordCodecTest, AValueIsTheLittleEndianCrcOfTheMessageThenTheMessage) {
  const std::string message = Record().SerializeAsString();
  const uint32_t crc = Crc32c(message.data(), message.size());
  std::string want;
  for (int i = 0; i < 4; ++i) want.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
  want += message;
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

}  // namespace
}  // namespace kvs
