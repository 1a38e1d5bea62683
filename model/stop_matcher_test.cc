#include "model/stop_matcher.h"

#include "gtest/gtest.h"

namespace kvs {
namespace {

TEST(StopMatcherTest, NoStopsPassesEverythingThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.Push("abc"), "abc");
  EXPECT_EQ(m.Finish(), "");
}

TEST(StopMatcherTest, StopsBeforeTheStopStringAcrossPushes) {
  StopMatcher m({"\n\nUser:"});
  EXPECT_EQ(m.Push("Hello"), "Hello");
  EXPECT_EQ(m.Push(" there\n"), " there");  // "\n" may start the stop string
  EXPECT_EQ(m.Push("\nUs"), "");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.Push("er: next"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.Push("more"), "");
  EXPECT_EQ(m.Finish(), "");
}

TEST(StopMatcherTest, FalseStartIsReleased) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.Push("a ST"), "a ");
  EXPECT_EQ(m.Push("OX"), "STOX");
  EXPECT_EQ(m.Push("ST"), "");
  EXPECT_EQ(m.Finish(), "ST");
}

TEST(StopMatcherTest, EarliestOfSeveralStopsWins) {
  StopMatcher m({"world", "lo"});
  EXPECT_EQ(m.Push("hello world"), "hel");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcherTest, MultiByteStopString) {
  StopMatcher m({"é!"});
  EXPECT_EQ(m.Push("caf"), "caf");
  EXPECT_EQ(m.Push("é"), "");
  EXPECT_EQ(m.Push("!"), "");
  EXPECT_TRUE(m.stopped());
}

}  // namespace
}  // namespace kvs
