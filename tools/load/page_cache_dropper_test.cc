#include "tools/load/page_cache_dropper.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kvs::load {
namespace {

// Pages of `path` the page cache holds, by mincore of a mapping of it (the
// test owns the file, so mincore reports the cache's state).
int CachedPages(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const size_t bytes = std::filesystem::file_size(path);
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return -1;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((bytes + page - 1) / page);
  int cached = -1;
  if (::mincore(map, bytes, resident.data()) == 0) {
    cached = 0;
    for (unsigned char r : resident) cached += r & 1;
  }
  ::munmap(map, bytes);
  return cached;
}

std::string WriteSyncedFile(const std::string& path, size_t bytes) {
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string(bytes, 'k');
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ::fsync(fd);  // only written pages can be dropped
  ::close(fd);
  std::ifstream in(path, std::ios::binary);  // and read back: cached
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class PageCacheDropperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/kvs_dropper_XXXXXX";
    ASSERT_NE(::mkdtemp(name), nullptr);
    dir_ = name;
    struct statfs fs {};
    if (::statfs(dir_.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC) {
      GTEST_SKIP() << "/tmp is tmpfs: its files are the page cache and cannot be dropped";
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(PageCacheDropperTest, DropsEveryFileUnderTheDirectoryAndLeavesTheirBytes) {
  std::filesystem::create_directories(dir_ + "/pages/ab");
  const std::vector<std::string> files = {dir_ + "/MANIFEST", dir_ + "/pages/ab/page"};
  for (const std::string& f : files) WriteSyncedFile(f, 256 * 1024);
  for (const std::string& f : files) {
    ASSERT_GT(CachedPages(f), 0) << f << " was not cached after its read";
  }

  EXPECT_EQ(DropPageCache(dir_), 2);

  for (const std::string& f : files) {
    EXPECT_EQ(CachedPages(f), 0) << f;
    std::ifstream in(f, std::ios::binary);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), std::string(256 * 1024, 'k')) << f;
  }
}

TEST_F(PageCacheDropperTest, AMissingDirectoryDropsNothing) {
  EXPECT_EQ(DropPageCache(dir_ + "/absent"), 0);
}

}  // namespace
}  // namespace kvs::load
