#include "service/request_checks.h"

#include <gtest/gtest.h>

namespace kvs {
namespace {

const std::string kSession = "ses_0123456789abcdef0123456789abcdef";
const std::string kCheckpoint = "ckpt_0123456789abcdef0123456789abcdef";

TEST(RequestChecks, IdsTheServerHandsOutAreAccepted) {
  EXPECT_TRUE(CheckSessionId("session_id", kSession).ok());
  EXPECT_TRUE(CheckCheckpointId("checkpoint_id", kCheckpoint).ok());
}

TEST(RequestChecks, IdsWithARouteKeyAreAccepted) {
  EXPECT_TRUE(CheckSessionId("session_id", "ses_user-42_A.0123456789abcdef0123456789abcdef").ok());
  EXPECT_TRUE(CheckCheckpointId("checkpoint_id", "ckpt_k.0123456789abcdef0123456789abcdef").ok());
  EXPECT_TRUE(CheckSessionId("session_id", "ses_" + std::string(64, 'k') + ".0123456789abcdef0123456789abcdef").ok());
}

TEST(RequestChecks, IdsWithAMalformedRouteKeyAreInvalidArgument) {
  for (const std::string& bad :
       {std::string("ses_.0123456789abcdef0123456789abcdef"),
        std::string("ses_a b.0123456789abcdef0123456789abcdef"),
        std::string("ses_a.b.0123456789abcdef0123456789abcdef"),
        "ses_" + std::string(65, 'k') + ".0123456789abcdef0123456789abcdef",
        std::string("ses_key.0123456789abcdef"), std::string("ses_key.")}) {
    EXPECT_EQ(CheckSessionId("session_id", bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(RequestChecks, MalformedIdsAreInvalidArgument) {
  for (const std::string& bad : {std::string(), std::string("ses_"), kSession + "0",
                                 kSession.substr(0, 35), std::string("ses_0123456789ABCDEF0123456789abcdef"),
                                 kCheckpoint, std::string("ses_0123456789abcdef0123456789abcde\xff", 36)}) {
    absl::Status s = CheckSessionId("session_id", bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("session_id"), std::string::npos);
  }
  EXPECT_EQ(CheckCheckpointId("checkpoint_id", kSession).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RequestChecks, AHugeIdIsQuotedAsAShortPrefixWithItsSize) {
  const std::string huge(100000, 'x');
  absl::Status s = CheckSessionId("session_id", huge);
  EXPECT_LT(s.message().size(), 200u);
  EXPECT_NE(s.message().find("(100000 bytes)"), std::string::npos) << s.message();
}

TEST(RequestChecks, PageTokensAreEmptyOrAnIdOfTheirList) {
  EXPECT_TRUE(CheckSessionPageToken("").ok());
  EXPECT_TRUE(CheckSessionPageToken(kSession).ok());
  EXPECT_EQ(CheckSessionPageToken("garbage").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckSessionPageToken(kCheckpoint).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckCheckpointPageToken(kCheckpoint).ok());
  EXPECT_EQ(CheckCheckpointPageToken(kSession).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvs
