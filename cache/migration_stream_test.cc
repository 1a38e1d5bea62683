// Migration stream: round trips of a session and a checkpoint with their
// pages, and DATA_LOSS (never a crash, never a partial result) for a
// flipped byte anywhere, every truncation, reordered or dropped frames,
// trailing bytes, and a record string field of invalid UTF-8 (named, and
// kept from protobuf's log); FAILED_PRECONDITION for an intact header of
// another version.
#include "cache/migration_stream.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cache/crc32c.h"
#include "cache/page_codec.h"
#include "gtest/gtest.h"
#include "proto/protobuf_log_capture_test_util.h"

namespace kvs {
namespace {

constexpr KvGeometry kGeometry{.n_layers = 2, .n_kv_heads = 1, .head_dim = 4, .page_tokens = 4,
                               .dtype = KvDtype::kF16};

struct Fixture {
  SessionRecord record;
  std::vector<std::string> pages;  // encoded, one per record page
};

// A session of 9 tokens with KV for 8 (two full pages) and its pages.
Fixture MakeSession() {
  Fixture f;
  f.record.set_id("ses_0123456789abcdef");
  f.record.set_model_fingerprint("fp");
  std::vector<int32_t> tokens = {1, 5, 6, 7, 8, 9, 10, 11, 12};
  for (int32_t t : tokens) f.record.add_tokens(t);
  f.record.set_kv_length(8);
  for (const PageHash& h : ChainPageHashes("fp", kGeometry, tokens, 8)) {
    f.record.add_page_hashes(std::string(h.view()));
  }
  for (int p = 0; p < 2; ++p) {
    std::vector<uint8_t> page(kGeometry.page_bytes());
    for (size_t i = 0; i < page.size(); ++i) page[i] = static_cast<uint8_t>(i * 7 + p);
    f.pages.push_back(EncodePage(kGeometry, page.data(), 4));
  }
  return f;
}

PageHash HashAt(const SessionRecord& r, int i) { return *PageHash::FromBytes(r.page_hashes(i)); }

std::string Stream(const Fixture& f, bool omit_first = false) {
  MigrationStreamWriter w;
  w.SetSession(f.record);
  for (int i = omit_first ? 1 : 0; i < 2; ++i) w.AddPage(HashAt(f.record, i), f.pages[i]);
  return std::move(w).Finish();
}

TEST(MigrationStreamTest, ASessionAndItsPagesReadBackAsWritten) {
  const Fixture f = MakeSession();
  absl::StatusOr<MigrationContents> got = DecodeMigrationStream(Stream(f));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->session.has_value());
  EXPECT_FALSE(got->checkpoint.has_value());
  EXPECT_EQ(got->session->SerializeAsString(), f.record.SerializeAsString());
  ASSERT_EQ(got->pages.size(), 2u);
  EXPECT_EQ(got->pages.at(HashAt(f.record, 0)), f.pages[0]);
  EXPECT_EQ(got->pages.at(HashAt(f.record, 1)), f.pages[1]);
}

TEST(MigrationStreamTest, ACheckpointReadsBackAndOmittedPagesAreSimplyAbsent) {
  const Fixture f = MakeSession();
  CheckpointRecord c;
  c.set_id("ckp_0123456789abcdef");
  c.set_name("before");
  *c.mutable_session() = f.record;
  MigrationStreamWriter w;
  w.SetCheckpoint(c);
  w.AddPage(HashAt(f.record, 1), f.pages[1]);
  absl::StatusOr<MigrationContents> got = DecodeMigrationStream(std::move(w).Finish());
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->checkpoint.has_value());
  EXPECT_EQ(got->checkpoint->name(), "before");
  EXPECT_EQ(got->record().id(), f.record.id());
  EXPECT_EQ(got->pages.size(), 1u);
  EXPECT_TRUE(got->pages.contains(HashAt(f.record, 1)));
}

TEST(MigrationStreamTest, EveryFlippedByteIsDataLoss) {
  const std::string good = Stream(MakeSession());
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x01;
    absl::StatusOr<MigrationContents> got = DecodeMigrationStream(bad);
    ASSERT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << "byte " << i << ": " << got.status();
  }
}

TEST(MigrationStreamTest, EveryTruncationAndTrailingBytesAreDataLoss) {
  const std::string good = Stream(MakeSession());
  for (size_t n = 0; n < good.size(); ++n) {
    ASSERT_EQ(DecodeMigrationStream(good.substr(0, n)).status().code(), absl::StatusCode::kDataLoss)
        << n;
  }
  EXPECT_EQ(DecodeMigrationStream(good + "x").status().code(), absl::StatusCode::kDataLoss);
}

TEST(MigrationStreamTest, ReorderedOrDroppedFramesAreDataLoss) {
  const Fixture f = MakeSession();
  const std::string good = Stream(f);
  // Frame boundaries: header, record, page 0, page 1, end.
  const size_t record_end = kMigrationHeaderBytes + 12 + f.record.ByteSizeLong() + 4;
  const size_t page_frame = 12 + 16 + f.pages[0].size() + 4;
  const std::string header = good.substr(0, kMigrationHeaderBytes);
  const std::string record = good.substr(kMigrationHeaderBytes, record_end - kMigrationHeaderBytes);
  const std::string page0 = good.substr(record_end, page_frame);
  const std::string page1 = good.substr(record_end + page_frame, page_frame);
  const std::string end = good.substr(record_end + 2 * page_frame);
  ASSERT_EQ(header + record + page0 + page1 + end, good);
  for (const std::string& bad : {header + record + page1 + page0 + end,   // pages swapped
                                 header + page0 + record + page1 + end,   // page before record
                                 header + record + page0 + end,           // page dropped
                                 header + record + page0 + page0 + page1 + end,  // page twice
                                 header + record + record + page0 + page1 + end,  // two records
                                 header + end}) {
    EXPECT_EQ(DecodeMigrationStream(bad).status().code(), absl::StatusCode::kDataLoss)
        << bad.size() << " bytes";
  }
}

TEST(MigrationStreamTest, APageTheRecordDoesNotListIsDataLoss) {
  const Fixture f = MakeSession();
  MigrationStreamWriter w;
  w.SetSession(f.record);
  PageHash stranger{};
  stranger.bytes[0] = 42;
  w.AddPage(stranger, f.pages[0]);
  EXPECT_EQ(DecodeMigrationStream(std::move(w).Finish()).status().code(), absl::StatusCode::kDataLoss);
}

// DecodeMigrationStream of `stream`, with what protobuf logged meanwhile.
absl::Status DecodeLogging(const std::string& stream, std::vector<std::string>* logged) {
  absl::Status status;
  {
    ProtobufLogCapture capture;
    status = DecodeMigrationStream(stream).status();
  }
  *logged = ProtobufLogCapture::lines();
  return status;
}

TEST(MigrationStreamTest, ARecordStringOfInvalidUtf8IsDataLossNamingTheFieldAndNothingIsLogged) {
  std::vector<std::string> logged;
  Fixture f = MakeSession();
  f.record.set_owner("acme\xff");  // serializing it logs; reading it back must not
  absl::Status got = DecodeLogging(Stream(f), &logged);
  EXPECT_EQ(got.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(got.message(), "migration stream: frame 0 at byte 12: the record's owner is not valid UTF-8");
  EXPECT_TRUE(logged.empty()) << logged.front();

  f = MakeSession();
  (*f.record.mutable_labels())["\xc0\xaf"] = "v";
  got = DecodeLogging(Stream(f), &logged);
  EXPECT_EQ(got.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(got.message(), "migration stream: frame 0 at byte 12: the record's labels: a key is not valid UTF-8");
  EXPECT_TRUE(logged.empty()) << logged.front();

  CheckpointRecord c;
  c.set_id("ckp_0123456789abcdef");
  *c.mutable_session() = MakeSession().record;
  c.mutable_session()->set_parent_session_id("ses_\xed\xa0\x80");
  MigrationStreamWriter w;
  w.SetCheckpoint(c);
  got = DecodeLogging(std::move(w).Finish(), &logged);
  EXPECT_EQ(got.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(got.message(),
            "migration stream: frame 0 at byte 12: the record's session.parent_session_id is not valid UTF-8");
  EXPECT_TRUE(logged.empty()) << logged.front();
}

TEST(MigrationStreamTest, AnIntactHeaderOfAnotherVersionIsFailedPrecondition) {
  std::string s = Stream(MakeSession());
  s[4] = 2;  // version 2, header checksum recomputed
  const uint32_t crc = Crc32c(s.data(), 8);
  for (int i = 0; i < 4; ++i) s[8 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  absl::StatusOr<MigrationContents> got = DecodeMigrationStream(s);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(got.status().message(), "migration stream version 2; this server reads version 1");
}

TEST(MigrationStreamTest, SomethingElseEntirelyIsDataLossSayingSo) {
  absl::StatusOr<MigrationContents> got = DecodeMigrationStream("GIF89a and then some more bytes");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(got.status().message(),
            "migration stream: does not start with \"KVSM\" (not a kvsession migration stream)");
}

}  // namespace
}  // namespace kvs
