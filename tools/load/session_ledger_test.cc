#include "tools/load/session_ledger.h"

#include <gtest/gtest.h>

namespace kvs::load {
namespace {

using Tokens = std::vector<int32_t>;

// A ledger with one session: BOS (1) + {10, 11}, then Append {12, 13}.
class SessionLedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ledger_.AckNewSession("s", {1, 10, 11});
    ASSERT_TRUE(ledger_.AckAppend("s", 5, Tokens{12, 13}).ok());
  }
  VerifyResult VerifyWith(std::optional<Tokens> tokens) {
    ServerView view;
    view.sessions["s"] = std::move(tokens);
    return ledger_.Verify(view);
  }
  SessionLedger ledger_;
};

TEST_F(SessionLedgerTest, AcknowledgedCallsFoundAfterARestartAreCheckedAndNoneLost) {
  VerifyResult r = VerifyWith(Tokens{1, 10, 11, 12, 13});
  EXPECT_EQ(r.checked, 2);  // the Create and the Append
  EXPECT_EQ(r.lost, 0);
  EXPECT_EQ(r.phantom, 0);
}

TEST_F(SessionLedgerTest, AnAcknowledgedAppendMissingAfterARestartIsLost) {
  VerifyResult r = VerifyWith(Tokens{1, 10, 11});
  EXPECT_EQ(r.checked, 2);
  EXPECT_EQ(r.lost, 1);
  EXPECT_FALSE(r.problems.empty());
}

TEST_F(SessionLedgerTest, ADifferentTokenAfterARestartLosesTheCallThatAddedIt) {
  VerifyResult r = VerifyWith(Tokens{1, 10, 11, 12, 99});
  EXPECT_EQ(r.checked, 2);
  EXPECT_EQ(r.lost, 1);  // the Append; the Create's tokens are intact
}

TEST_F(SessionLedgerTest, ASessionMissingAfterARestartLosesEveryAcknowledgedCall) {
  VerifyResult r = VerifyWith(std::nullopt);
  EXPECT_EQ(r.lost, 2);
}

TEST_F(SessionLedgerTest, MoreTokensThanAcknowledgedWithNoCallInFlightIsAPhantom) {
  VerifyResult r = VerifyWith(Tokens{1, 10, 11, 12, 13, 14});
  EXPECT_EQ(r.lost, 0);
  EXPECT_EQ(r.phantom, 1);
}

TEST_F(SessionLedgerTest, MoreTokensThanAcknowledgedAreAllowedAfterAnUnacknowledgedCall) {
  ledger_.MarkUncertain("s");
  VerifyResult r = VerifyWith(Tokens{1, 10, 11, 12, 13, 14});
  EXPECT_EQ(r.lost, 0);
  EXPECT_EQ(r.phantom, 0);
  // The server's state is the new baseline: the extra token is now required.
  VerifyResult again = VerifyWith(Tokens{1, 10, 11, 12, 13});
  EXPECT_EQ(again.lost, 1);
}

TEST_F(SessionLedgerTest, AnAcknowledgementContradictingAnEarlierOneIsAnError) {
  EXPECT_FALSE(ledger_.AckAppend("s", 5, Tokens{77}).ok());
  EXPECT_TRUE(ledger_.AckAppend("s", 6, Tokens{13, 14}).ok());  // overlaps, agrees
}

TEST_F(SessionLedgerTest, AnAcknowledgedDeleteThatComesBackIsLost) {
  ASSERT_TRUE(ledger_.BeginDelete("s"));
  EXPECT_EQ(ledger_.live_sessions(), 0u);
  ledger_.AckDelete("s");
  EXPECT_EQ(VerifyWith(Tokens{1, 10, 11, 12, 13}).lost, 1);
}

TEST_F(SessionLedgerTest, AnAcknowledgedDeleteThatStaysDeletedIsChecked) {
  ASSERT_TRUE(ledger_.BeginDelete("s"));
  ledger_.AckDelete("s");
  VerifyResult r = VerifyWith(std::nullopt);
  EXPECT_EQ(r.lost, 0);
  EXPECT_GE(r.checked, 1);
}

TEST_F(SessionLedgerTest, ARejectedDeletePutsTheSessionBackInThePool) {
  ASSERT_TRUE(ledger_.BeginDelete("s"));
  EXPECT_FALSE(ledger_.BeginDelete("s"));
  ledger_.DeleteRejected("s");
  EXPECT_EQ(ledger_.live_sessions(), 1u);
}

TEST_F(SessionLedgerTest, AnUnacknowledgedDeleteMayOrMayNotHaveHappened) {
  ASSERT_TRUE(ledger_.BeginDelete("s"));
  ledger_.DeleteUnknown("s");
  EXPECT_EQ(VerifyWith(std::nullopt).lost, 0);
}

TEST_F(SessionLedgerTest, ACallIsOverlappedOnlyWhenAnotherCallRanOnTheSameSession) {
  SessionLedger::CallTicket alone = ledger_.BeginCall("s");
  EXPECT_FALSE(ledger_.EndCall(alone).overlapped);

  SessionLedger::CallTicket first = ledger_.BeginCall("s");
  SessionLedger::CallTicket second = ledger_.BeginCall("s");
  EXPECT_TRUE(ledger_.EndCall(second).overlapped);
  EXPECT_TRUE(ledger_.EndCall(first).overlapped);
}

TEST_F(SessionLedgerTest, ACancelIsRecentForTheNextCallOnTheSession) {
  ledger_.MarkUncertain("s", /*cancelled=*/true);
  SessionLedger::CallTicket next = ledger_.BeginCall("s");
  EXPECT_TRUE(ledger_.EndCall(next).recent_cancel);
}

TEST_F(SessionLedgerTest, AnAcknowledgedTruncateThenAppendIsCheckedAtItsNewTokens) {
  ASSERT_TRUE(ledger_.BeginTruncate("s"));
  ledger_.AckTruncate("s", 2);
  EXPECT_EQ(ledger_.AcknowledgedLength("s"), 2);
  ASSERT_TRUE(ledger_.AckAppend("s", 4, Tokens{20, 21}).ok());  // rewrites positions 2 and 3
  VerifyResult r = VerifyWith(Tokens{1, 10, 20, 21});
  EXPECT_EQ(r.checked, 4);  // Create, Append, Truncate, Append
  EXPECT_EQ(r.lost, 0);
}

TEST_F(SessionLedgerTest, ASessionStillLongerThanAnAcknowledgedTruncateLostIt) {
  ASSERT_TRUE(ledger_.BeginTruncate("s"));
  ledger_.AckTruncate("s", 3);
  VerifyResult r = VerifyWith(Tokens{1, 10, 11, 12, 13});
  EXPECT_EQ(r.lost, 1);
  EXPECT_EQ(r.phantom, 0);
}

TEST_F(SessionLedgerTest, TheOldTokensAfterATruncateAndAppendLoseTheCalls) {
  ASSERT_TRUE(ledger_.BeginTruncate("s"));
  ledger_.AckTruncate("s", 3);
  ASSERT_TRUE(ledger_.AckAppend("s", 5, Tokens{30, 31}).ok());
  EXPECT_GE(VerifyWith(Tokens{1, 10, 11, 12, 13}).lost, 1);
}

TEST_F(SessionLedgerTest, AnUnacknowledgedTruncateMayOrMayNotHaveHappened) {
  ASSERT_TRUE(ledger_.BeginTruncate("s"));
  ledger_.TruncateUnknown("s", 3);
  EXPECT_EQ(VerifyWith(Tokens{1, 10, 11}).lost, 0);
  ASSERT_TRUE(ledger_.BeginTruncate("s"));
  ledger_.TruncateUnknown("s", 2);
  EXPECT_EQ(VerifyWith(Tokens{1, 10, 11}).lost, 0);  // it did not happen
  ASSERT_TRUE(ledger_.BeginTruncate("s"));
  ledger_.TruncateUnknown("s", 2);
  EXPECT_EQ(VerifyWith(Tokens{1, 99}).lost, 1);  // a known token changed either way
}

TEST_F(SessionLedgerTest, ARejectedTruncateChangesNothing) {
  ASSERT_TRUE(ledger_.BeginTruncate("s"));
  ledger_.TruncateRejected("s");
  EXPECT_EQ(ledger_.AcknowledgedLength("s"), 5);
  EXPECT_EQ(VerifyWith(Tokens{1, 10, 11}).lost, 1);  // the Append is still required
}

TEST_F(SessionLedgerTest, ATruncateRunsAloneOnItsSession) {
  ASSERT_TRUE(ledger_.EnterSession("s"));
  EXPECT_FALSE(ledger_.BeginTruncate("s"));  // a call is in its section
  ledger_.LeaveSession("s");
  ASSERT_TRUE(ledger_.BeginTruncate("s"));
  EXPECT_FALSE(ledger_.EnterSession("s"));  // other calls leave it be
  EXPECT_FALSE(ledger_.BeginTruncate("s"));
  ledger_.AckTruncate("s", 2);
  EXPECT_TRUE(ledger_.EnterSession("s"));
  ledger_.LeaveSession("s");
  ASSERT_TRUE(ledger_.BeginDelete("s"));
  EXPECT_FALSE(ledger_.BeginTruncate("s"));  // not live
}

TEST(SessionLedger, ACheckpointMissingOrOfAnotherLengthAfterARestartIsLost) {
  SessionLedger ledger;
  ledger.AckSnapshot("c1", 4, {1, 2, 3, 4});
  ledger.AckSnapshot("c2", 4, {1, 2, 3, 4});
  ledger.AckSnapshot("c3", 4, {1, 2, 3, 4});
  ServerView view;
  view.checkpoints = {{"c1", 4}, {"c2", 5}};
  VerifyResult r = ledger.Verify(view);
  EXPECT_EQ(r.checked, 3);
  EXPECT_EQ(r.lost, 2);
}

TEST(SessionLedger, AnAcknowledgedCheckpointDeleteThatComesBackIsLost) {
  SessionLedger ledger;
  ledger.AckSnapshot("c1", 4, {1, 2, 3, 4});
  ASSERT_TRUE(ledger.BeginDeleteCheckpoint("c1"));
  EXPECT_TRUE(ledger.CheckpointDeleted("c1"));
  ledger.AckDeleteCheckpoint("c1");
  ServerView view;
  view.checkpoints = {{"c1", 4}};
  EXPECT_EQ(ledger.Verify(view).lost, 1);
}

TEST(SessionLedger, AForkBranchCopiesTheKnownTokensOfItsSource) {
  SessionLedger ledger;
  ledger.AckNewSession("src", {1, 10});
  EXPECT_EQ(ledger.KnownPrefix("src", 3), (Tokens{1, 10, kUnknownToken}));
}

TEST(SessionLedger, TracksEverySessionAndCheckpointItWasToldOfDeletedOrNot) {
  SessionLedger ledger;
  ledger.AckNewSession("s1", {1});
  ledger.AckNewSession("s2", {1});
  ledger.AckSnapshot("c1", 1, {1});
  ASSERT_TRUE(ledger.BeginDelete("s2"));
  ledger.AckDelete("s2");
  EXPECT_TRUE(ledger.Tracks("s1"));
  EXPECT_TRUE(ledger.Tracks("s2"));
  EXPECT_TRUE(ledger.Tracks("c1"));
  EXPECT_FALSE(ledger.Tracks("s3"));
  EXPECT_FALSE(SessionLedger().Tracks("s1"));
}

}  // namespace
}  // namespace kvs::load
