#include "tools/load/error_classifier.h"

#include <gtest/gtest.h>

namespace kvs::load {
namespace {

const absl::Status kBusy = absl::FailedPreconditionError(
    "session ses_1 is busy: another Generate or Append is running on it");

TEST(ErrorClassifier, UnavailableDuringAKillWindowIsExpected) {
  Classification c = ClassifyError(absl::UnavailableError("Socket closed"),
                                   {.kill_window = true, .mid_stream = true}, false);
  EXPECT_TRUE(c.expected);
  EXPECT_EQ(c.kind, ErrorKind::kKillWindow);
}

TEST(ErrorClassifier, UnavailableOutsideAKillWindowIsUnexpected) {
  EXPECT_FALSE(ClassifyError(absl::UnavailableError("could not persist"), {}, false).expected);
}

TEST(ErrorClassifier, InternalIsUnexpectedEvenDuringAKillWindow) {
  EXPECT_FALSE(ClassifyError(absl::InternalError("x"), {.kill_window = true}, false).expected);
  EXPECT_FALSE(ClassifyError(absl::DataLossError("x"), {.kill_window = true}, false).expected);
}

TEST(ErrorClassifier, BusyWhileAnotherCallRanOnTheSessionIsAnExpectedConflict) {
  Classification c = ClassifyError(kBusy, {.overlapped_on_session = true}, /*strict_busy=*/true);
  EXPECT_TRUE(c.expected);
  EXPECT_EQ(c.kind, ErrorKind::kBusyConflict);
}

TEST(ErrorClassifier, BusyOnAnIdleSessionIsReportedApartAndIsUnexpectedWhenStrict) {
  EXPECT_EQ(ClassifyError(kBusy, {}, false).kind, ErrorKind::kBusyIdle);
  EXPECT_TRUE(ClassifyError(kBusy, {}, false).expected);
  EXPECT_FALSE(ClassifyError(kBusy, {}, true).expected);
}

TEST(ErrorClassifier, BusyRightAfterOurCancelIsReportedApart) {
  Classification c = ClassifyError(kBusy, {.recent_cancel_on_session = true}, false);
  EXPECT_EQ(c.kind, ErrorKind::kBusyAfterCancel);
  EXPECT_TRUE(c.expected);
  EXPECT_FALSE(ClassifyError(kBusy, {.recent_cancel_on_session = true}, true).expected);
}

TEST(ErrorClassifier, AbortedBusyCountsAsBusyButOtherFailedPreconditionsDoNot) {
  EXPECT_TRUE(IsBusy(absl::AbortedError("session is busy")));
  const absl::Status foreign = absl::FailedPreconditionError("made with another model");
  EXPECT_FALSE(IsBusy(foreign));
  EXPECT_FALSE(ClassifyError(foreign, {.overlapped_on_session = true}, false).expected);
}

TEST(ErrorClassifier, NotFoundIsExpectedOnlyForATargetWeDeleted) {
  const absl::Status gone = absl::NotFoundError("no session 'ses_1'");
  EXPECT_TRUE(ClassifyError(gone, {.target_deleted = true}, false).expected);
  EXPECT_FALSE(ClassifyError(gone, {}, false).expected);
}

TEST(ErrorClassifier, AStreamThatBreaksAfterItsFirstTokenOutsideAKillWindowIsUnexpected) {
  Classification c = ClassifyError(absl::UnknownError("Stream removed"), {.mid_stream = true}, false);
  EXPECT_FALSE(c.expected);
  EXPECT_EQ(c.kind, ErrorKind::kMidStream);
}

TEST(ErrorClassifier, AQuotaRefusalIsExpectedOnlyForTheTenantGivenAQuota) {
  const absl::Status refused = absl::ResourceExhaustedError("tenant quota max_sessions=2 reached");
  Classification c = ClassifyError(refused, {.caller_has_quota = true}, true);
  EXPECT_TRUE(c.expected);
  EXPECT_EQ(c.kind, ErrorKind::kTenantQuota);
  EXPECT_FALSE(ClassifyError(refused, {}, true).expected);
}

TEST(ErrorClassifier, AQuotaRefusalNamesItsQuotaAndNothingElseDoes) {
  EXPECT_EQ(RefusedQuota(absl::ResourceExhaustedError("tenant quota max_store_bytes=300000 reached")),
            "max_store_bytes");
  EXPECT_EQ(RefusedQuota(absl::ResourceExhaustedError("tenant quota max_sessions=2 reached")), "max_sessions");
  EXPECT_EQ(RefusedQuota(absl::ResourceExhaustedError("tenant quota max_sessions_x=2 reached")), "");
  EXPECT_EQ(RefusedQuota(absl::ResourceExhaustedError("tenant quota reached")), "");
  EXPECT_EQ(RefusedQuota(absl::FailedPreconditionError("tenant quota max_sessions=2 reached")), "");
}

TEST(ErrorClassifier, OtherResourceExhaustedIsUnexpectedEvenForATenantWithAQuota) {
  const absl::Status full = absl::ResourceExhaustedError("session limit (--max-sessions 64) reached");
  EXPECT_FALSE(IsTenantQuotaRefusal(full));
  EXPECT_FALSE(ClassifyError(full, {.caller_has_quota = true}, false).expected);
  EXPECT_FALSE(IsTenantQuotaRefusal(absl::FailedPreconditionError("tenant quota max_sessions=2 reached")));
}

}  // namespace
}  // namespace kvs::load
