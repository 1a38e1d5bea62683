// ScratchDir (tests/scratch_dir.h): each one a fresh, empty, distinct
// directory that goes away with its owner.
#include "tests/scratch_dir.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace kvs {
namespace {

TEST(ScratchDir, IsAnEmptyDirectoryNamedForItsTestUntilItIsDestroyed) {
  std::filesystem::path path;
  {
    ScratchDir dir("scratch_dir_test");
    path = dir.path();
    ASSERT_TRUE(std::filesystem::is_directory(path));
    EXPECT_TRUE(std::filesystem::is_empty(path));
    EXPECT_NE(path.filename().string().find("IsAnEmptyDirectoryNamedForItsTestUntilItIsDestroyed"),
              std::string::npos);
    std::filesystem::create_directories(dir.path() / "pages");
    std::ofstream(dir.file("pages/a.kvpage")) << "bytes";
    EXPECT_TRUE(std::filesystem::exists(dir.file("pages/a.kvpage")));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(ScratchDir, TwoInOneTestAreDifferentDirectories) {
  ScratchDir a("scratch_dir_test");
  ScratchDir b("scratch_dir_test");
  EXPECT_NE(a.path(), b.path());
  std::ofstream(a.file("only_in_a")) << "x";
  EXPECT_FALSE(std::filesystem::exists(b.file("only_in_a")));
}

TEST(ScratchDir, ALeftoverOfTheSameNameIsEmptiedFirst) {
  std::string previous;
  { previous = ScratchDir("scratch_dir_test").string(); }
  // The names end in a count that rises by one per ScratchDir: plant what a
  // crashed run would have left where the next one goes.
  const size_t count_at = previous.rfind('_') + 1;
  const std::filesystem::path next =
      previous.substr(0, count_at) + std::to_string(std::stoi(previous.substr(count_at)) + 1);
  std::filesystem::create_directories(next);
  std::ofstream(next / "stale") << "left by a crash";
  ScratchDir dir("scratch_dir_test");
  ASSERT_EQ(dir.path(), next);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

class ScratchDirParameterized : public ::testing::TestWithParam<int> {};

TEST_P(ScratchDirParameterized, ASlashInTheTestNameMakesNoSubdirectory) {
  ScratchDir dir("scratch_dir_test");
  EXPECT_EQ(dir.path().parent_path(), std::filesystem::temp_directory_path());
  EXPECT_TRUE(std::filesystem::is_directory(dir.path()));
}

INSTANTIATE_TEST_SUITE_P(Any, ScratchDirParameterized, ::testing::Values(0));

}  // namespace
}  // namespace kvs
