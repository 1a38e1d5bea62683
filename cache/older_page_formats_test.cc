// A store written by earlier builds restores after an upgrade: full q8_0
// pages of page formats 1 (every block as rows) and 2 (keys packed, values
// rows) read back through SessionStore in the pool's layout (page format
// 3's, kernels/q8_0_kv_blocks.h), warm and straight from the disk, next to
// pages this build writes; over a real RocksDB and real page files.
#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "cache/page_codec.h"
#include "cache/page_codec_test_util.h"
#include "cache/page_files.h"
#include "cache/session_store.h"
#include "cache/store_test_records.h"
#include "gtest/gtest.h"
#include "rocksdb/file_system.h"
#include "tests/scratch_dir.h"

namespace kvs {
namespace {

KvGeometry Geometry() {
  return {.n_layers = 2, .n_kv_heads = 2, .head_dim = 64, .page_tokens = 16, .dtype = KvDtype::kQ8_0};
}

// A pool page as this build holds it: every byte distinct from its
// neighbours' (any bytes are a valid q8_0 block).
std::vector<uint8_t> PoolPage(int page) {
  std::vector<uint8_t> bytes(Geometry().page_bytes());
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 31 + page * 7 + i / 251);
  return bytes;
}

// The version each full page of the record is written in: page 0 as the
// builds before the forty-second sitting wrote it, page 1 as the
// forty-second's, page 2 as this build does.
constexpr uint32_t kVersions[] = {kPageFormatVersion, kPageFormatVersionPackedKeys, kPageFormatVersionQ8_0Blocks};

class OlderPageFormatsTest : public testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<SessionStore>> store = SessionStore::Open(dir_, {});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    std::vector<SessionRecord> sessions;
    std::vector<CheckpointRecord> checkpoints;
    ASSERT_TRUE(store_->LoadAll(&sessions, &checkpoints).ok());
    // 3 full pages and a partial one of 4 tokens.
    record_ = TestSessionRecord("s", Geometry(), 16 * 3 + 5, 1000, 16 * 3 + 4);
    ASSERT_EQ(record_.page_hashes_size(), 4);
    const absl::Status put = store_->PutSession(record_, [&](int i) -> absl::StatusOr<PageEncoding> {
      const int n = PageTokensAt(Geometry(), record_.kv_length(), i);
      if (n < Geometry().page_tokens || kVersions[i] == kPageFormatVersionQ8_0Blocks) {
        return EncodePage(Geometry(), PoolPage(i).data(), n);
      }
      return HandMadeEncoding(Geometry(), kVersions[i], n, AsOlderFormat(Geometry(), PoolPage(i), kVersions[i]));
    });
    ASSERT_TRUE(put.ok()) << put;
  }

  std::vector<SessionStore::PageRead> Reads(std::vector<std::vector<uint8_t>>& out) const {
    std::vector<SessionStore::PageRead> reads;
    out.assign(record_.page_hashes_size(), std::vector<uint8_t>(Geometry().page_bytes(), 0));
    for (int i = 0; i < record_.page_hashes_size(); ++i) {
      reads.push_back({PageHashOf(record_, i), PageTokensAt(Geometry(), record_.kv_length(), i), out[i].data()});
    }
    return reads;
  }

  // The full pages in `out` are the pool pages; the partial one holds the
  // pool page's first 4 slots of every block.
  void ExpectPoolPages(const std::vector<std::vector<uint8_t>>& out) const {
    const KvGeometry g = Geometry();
    for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i], PoolPage(i)) << "page " << i << ", format " << kVersions[i];
    const std::vector<uint8_t> last = PoolPage(3);
    for (int layer = 0; layer < g.n_layers; ++layer) {
      for (KvPart part : {KvPart::kKey, KvPart::kValue}) {
        for (int head = 0; head < g.n_kv_heads; ++head) {
          const size_t block = g.block_offset(layer, part, head);
          for (int slot = 0; slot < 4; ++slot) {
            EXPECT_EQ(SlotRow(g, part, out[3].data() + block, slot), SlotRow(g, part, last.data() + block, slot))
                << "layer " << layer << " part " << static_cast<int>(part) << " head " << head << " slot " << slot;
          }
        }
      }
    }
  }

  ScratchDir scratch_{"older_page_formats_test"};
  const std::string dir_ = scratch_.string();
  std::unique_ptr<SessionStore> store_;
  SessionRecord record_;
};

TEST_F(OlderPageFormatsTest, TheFilesHoldTheVersionsTheirBuildsWrote) {
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::string> page = store_->GetPage(PageHashOf(record_, i));
    ASSERT_TRUE(page.ok()) << page.status();
    absl::StatusOr<EncodedPageInfo> info = CheckEncodedPage(*page);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->version, kVersions[i]) << "page " << i;
  }
}

TEST_F(OlderPageFormatsTest, EveryPageReadsInThePoolsLayoutByReadPagesAndReadPage) {
  for (int threads : {1, 2}) {
    std::vector<std::vector<uint8_t>> out;
    const std::vector<SessionStore::PageRead> reads = Reads(out);
    ASSERT_TRUE(store_->ReadPages(reads, Geometry(), threads).ok()) << threads;
    ExpectPoolPages(out);
  }
  std::vector<std::vector<uint8_t>> one;
  const std::vector<SessionStore::PageRead> reads = Reads(one);
  for (const SessionStore::PageRead& read : reads) {
    ASSERT_TRUE(store_->ReadPage(read.hash, Geometry(), read.n_tokens, read.page).ok());
  }
  ExpectPoolPages(one);
}

TEST_F(OlderPageFormatsTest, FullPagesReadStraightFromTheDiskAreConvertedInThePool) {
  PageFiles files(dir_ + "/pages", rocksdb::FileSystem::Default().get());
  if (!files.ReadsDirect(PageHashOf(record_, 0))) GTEST_SKIP() << "this file system has no direct reads";
  const size_t file_bytes = EncodedPageBytes(Geometry(), Geometry().page_tokens);
  for (int i = 0; i < record_.page_hashes_size(); ++i) {
    const int fd = ::open(files.PathOf(PageHashOf(record_, i)).c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  if (files.LikelyCached(PageHashOf(record_, 0), file_bytes)) GTEST_SKIP() << "the page cache keeps these files";
  store_->PrepareDirectReads(Geometry());
  std::vector<std::vector<uint8_t>> out;
  ASSERT_TRUE(store_->ReadPages(Reads(out), Geometry(), 2).ok());
  ExpectPoolPages(out);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(files.LikelyCached(PageHashOf(record_, i), file_bytes)) << i;
}

}  // namespace
}  // namespace kvs
