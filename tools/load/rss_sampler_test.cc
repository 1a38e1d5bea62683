#include "tools/load/rss_sampler.h"

#include <unistd.h>

#include <gtest/gtest.h>

namespace kvs::load {
namespace {

TEST(RssSampler, ReadsVmRssInKibFromProcStatusText) {
  EXPECT_EQ(ParseVmRssKiB("Name:\tkvsessiond\nVmPeak:\t  99 kB\nVmRSS:\t   12345 kB\nThreads: 4\n"),
            12345);
  EXPECT_EQ(ParseVmRssKiB("Name:\tzombie\nThreads: 1\n"), std::nullopt);
  EXPECT_EQ(ParseVmRssKiB("VmRSS:\t   12345 MB\n"), std::nullopt);
}

TEST(RssSampler, ReadsTheResidentMemoryOfARunningProcess) {
  std::optional<int64_t> kib = ReadVmRssKiB(::getpid());
  ASSERT_TRUE(kib.has_value());
  EXPECT_GT(*kib, 0);
}

}  // namespace
}  // namespace kvs::load
