// PageStaging over a real model, pool and RocksDB store: staged pages are
// files before any record references them, the persist that ends the job
// uses those very files, and what no record took is deleted at Finish.
#include "service/page_staging.h"

#include <sys/stat.h>

#include <filesystem>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#include "service/service_test_env.h"
#include "service/task_executor.h"

namespace kvs {
namespace {

std::set<std::string> PageFiles(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/pages")) names.insert(e.path().filename().string());
  return names;
}

std::string FileOf(const PageHash& hash) { return hash.hex() + ".kvpage"; }

ino_t InodeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

class PageStagingTest : public testing::Test {
 protected:
  // An acquired session whose KV holds BOS + 70 tokens: 4 full pages of 16
  // and a partial one; nothing of it stored yet.
  std::shared_ptr<Session> FilledSession() {
    auto s = env_.sessions().CreateAcquired(SamplingParams{}, {});
    EXPECT_TRUE(s.ok()) << s.status();
    std::vector<int32_t> tokens;
    for (int i = 0; i < 70; ++i) tokens.push_back(30 + i);
    env_.Prefill(**s, tokens);
    EXPECT_EQ((*s)->page_hashes->size(), 4);
    return *s;
  }

  ServiceTestEnv env_;
};

TEST_F(PageStagingTest, StagedPagesAreTheFilesTheFinalPersistCommits) {
  KVS_REQUIRE_SHARED_MODEL();
  std::shared_ptr<Session> s = FilledSession();
  const std::set<std::string> before = PageFiles(env_.dir());
  {
    auto io = std::make_unique<TaskExecutor>(2);
    PageStaging staging(&env_.store(), &env_.pool(), io.get());
    staging.Stage(*s, 0, 2);
    staging.Stage(*s, 2, 4);
    io.reset();  // runs what was submitted, then joins
    std::set<std::string> staged = PageFiles(env_.dir());
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(staged.count(FileOf(s->page_hashes->hashes()[i]))) << i;
    EXPECT_EQ(staged.size(), before.size() + 4);
    for (int i = 0; i < 4; ++i) EXPECT_FALSE(env_.store().HasPage(s->page_hashes->hashes()[i]));  // no record yet
    const ino_t inode = InodeOf(env_.dir() + "/pages/" + FileOf(s->page_hashes->hashes()[1]));

    ASSERT_TRUE(env_.sessions().PersistAndRelease(s).ok());
    staging.Finish();
    EXPECT_EQ(InodeOf(env_.dir() + "/pages/" + FileOf(s->page_hashes->hashes()[1])), inode);
  }
  // Every page of the session is stored, one file each, nothing else.
  EXPECT_EQ(static_cast<int64_t>(PageFiles(env_.dir()).size()), env_.store().Stats().pages);
  EXPECT_TRUE(env_.store().Verify()->ok());
  // And the stored KV is the session's (a restart reads it back).
  const std::string id = s->id;
  env_.Reopen();
  auto restored = env_.sessions().Acquire(id);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ((*restored)->kv->length(), 70);
  env_.sessions().Release(*restored);
}

TEST_F(PageStagingTest, PagesNoRecordTookAreDeletedAtFinishOnceTheLastTaskRan) {
  KVS_REQUIRE_SHARED_MODEL();
  std::shared_ptr<Session> s = FilledSession();
  const std::set<std::string> before = PageFiles(env_.dir());
  auto io = std::make_unique<TaskExecutor>(1);
  PageStaging staging(&env_.store(), &env_.pool(), io.get());
  staging.Stage(*s, 0, 4);
  // Finish before the task may have run: the task itself discards.
  staging.Finish();
  io.reset();  // runs the task
  EXPECT_EQ(PageFiles(env_.dir()), before);
  env_.sessions().Discard(s);
}

TEST_F(PageStagingTest, AfterStagedRunsOnceEveryStagedPageIsAFile) {
  KVS_REQUIRE_SHARED_MODEL();
  std::shared_ptr<Session> s = FilledSession();
  auto io = std::make_unique<TaskExecutor>(2);
  PageStaging staging(&env_.store(), &env_.pool(), io.get());
  staging.Stage(*s, 0, 3);
  staging.Stage(*s, 3, 4);
  absl::Notification ran;
  std::set<std::string> seen;
  staging.AfterStaged([&] {
    seen = PageFiles(env_.dir());
    ran.Notify();
  });
  ASSERT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(60)));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(seen.count(FileOf(s->page_hashes->hashes()[i]))) << i;
  for (const std::string& name : seen) EXPECT_EQ(name.find(".tmp"), std::string::npos) << name;
  // The persist it runs uses those files.
  ASSERT_TRUE(env_.sessions().PersistAndRelease(s).ok());
  staging.Finish();
  io.reset();
  EXPECT_EQ(static_cast<int64_t>(PageFiles(env_.dir()).size()), env_.store().Stats().pages);
}

TEST_F(PageStagingTest, AfterStagedWithNothingPendingRunsAtOnceOnTheCallersThread) {
  KVS_REQUIRE_SHARED_MODEL();
  std::shared_ptr<Session> s = FilledSession();
  auto io = std::make_unique<TaskExecutor>(1);
  PageStaging staging(&env_.store(), &env_.pool(), io.get());
  std::thread::id ran_on;
  staging.AfterStaged([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  staging.Finish();
  env_.sessions().Discard(s);
}

}  // namespace
}  // namespace kvs
