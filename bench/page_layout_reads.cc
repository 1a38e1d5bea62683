// kvs-bench-page-reads: what a cold restore's reads cost with the pages laid
// out as the store keeps them (one file per page, docs/storage-format.md
// section 1) against all of them in one file (the layout
// docs/proposals/page-segments.md proposes), on the disk at hand, and what
// landing them in the KV pool adds.
//
// It writes `--pages` encoded pages of the Qwen3-0.6B q8_0 shape (28
// layers, 8 KV heads of 128, 16 tokens: 974,896 bytes each; 125 are a
// 2,000-token session) both ways under `--dir`: page files through the
// store's own PageFiles, and one file with each page at a 4 KiB boundary.
// Then, `--rounds` times, the rows alternating, `--readers` threads read
// them straight from the disk (O_DIRECT: no page cache, every read cold):
//
//   reads alone   each request into its reader's reused huge-page buffer,
//                 nothing more: the disk's rate for that request pattern
//   landed        and then, as a restore does, each page's header and
//                 payload copied out to the pool (4 KiB-aligned pages in
//                 huge-page memory) and the payload's CRC-32C checked there
//
// Rows: page files read by PageFiles::ReadIntoDirect (the store's read;
// it always copies, so landed only), alone and after the per-page check
// a restore makes first (PageFiles::LikelyCached); page files, one request
// each; one
// file, one request a page; one file, requests of up to `--request_kib`;
// and page files read straight into their pool pages (a direct read's
// DMA lands in the pool, no copy; landed = that and the CRC).
//
// The table gives median ms, GB/s of page bytes and the landed time
// against the store's. Needs a file system with O_DIRECT (not tmpfs).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/cpu_name.h"
#include "cache/crc32c.h"
#include "cache/page_codec.h"
#include "cache/page_files.h"
#include "cache/page_hash.h"
#include "rocksdb/file_system.h"

ABSL_FLAG(std::string, dir, "kvs-bench-page-reads.tmp", "scratch directory (made and removed; not tmpfs)");
ABSL_FLAG(int, pages, 125, "pages to write and read (125: a 2,000-token session)");
ABSL_FLAG(int, readers, 4, "reader threads (the store's restore uses 4)");
ABSL_FLAG(int, rounds, 9, "rounds of every row, alternating");
ABSL_FLAG(int, request_kib, 4096, "the largest request of the one-file row that reads runs of pages");

namespace kvs {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kAlign = 4096;

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The implementation Crc32c takes on this CPU (cache/crc32c.h).
const char* CrcName() {
  if (crc32c_internal::HaveAvx512Clmul()) return "avx512_clmul";
  if (crc32c_internal::HaveAvx2Clmul()) return "avx2_clmul";
  return crc32c_internal::HaveSse42() ? "sse42" : "portable";
}

// Runs work(i, buffer) for i in [0, n) on `readers` threads, items dealt
// out one at a time, each thread with its own buffer of `buffer_bytes`;
// false if any call returned false.
bool OnReaders(int readers, size_t n, size_t buffer_bytes,
               const std::function<bool(size_t, PageFiles::DirectBuffer*)>& work) {
  std::atomic<size_t> next{0};
  std::atomic<bool> ok{true};
  std::vector<std::thread> threads;
  for (int t = 0; t < readers; ++t) {
    threads.emplace_back([&] {
      PageFiles::DirectBuffer buffer(buffer_bytes);
      for (size_t i; (i = next.fetch_add(1)) < n;) {
        if (!work(i, &buffer)) ok = false;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return ok;
}

// Reads [offset, offset + bytes) of `path` with O_DIRECT into `to`
// (aligned, with room for the length rounded up to 4 KiB); false on any
// error or short read.
bool ReadDirect(const std::string& path, uint64_t offset, uint64_t bytes, char* to) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t got = ::pread(fd, to, RoundUp(bytes, kAlign), static_cast<off_t>(offset));
  ::close(fd);
  return got >= static_cast<ssize_t>(bytes);
}

int Run() {
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const int n_pages = absl::GetFlag(FLAGS_pages);
  const int readers = absl::GetFlag(FLAGS_readers);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const uint64_t request_bytes = uint64_t{1024} * std::max(1, absl::GetFlag(FLAGS_request_kib));
  if (n_pages < 1 || readers < 1 || rounds < 1) {
    std::fprintf(stderr, "--pages, --readers and --rounds must be at least 1\n");
    return 2;
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  std::filesystem::create_directories(dir, ignored);
  PageFiles files(dir + "/pages", rocksdb::FileSystem::Default().get());
  if (!files.CreateDir().ok()) {
    std::fprintf(stderr, "cannot make %s\n", dir.c_str());
    return 1;
  }

  // The pages: page files as the store writes them, and one file with
  // page p at offsets[p] (4 KiB boundaries, zeros between).
  const KvGeometry g = {.n_layers = 28, .n_kv_heads = 8, .head_dim = 128, .page_tokens = 16, .dtype = KvDtype::kQ8_0};
  const std::string one_file = dir + "/one_file";
  std::vector<uint8_t> ram(g.page_bytes());
  std::vector<PageHash> hashes;
  std::vector<uint64_t> offsets;
  std::vector<uint32_t> crcs;
  size_t page_bytes = 0;
  {
    std::FILE* out = std::fopen(one_file.c_str(), "wb");
    if (out == nullptr) return 1;
    for (int p = 0; p < n_pages; ++p) {
      for (size_t i = 0; i < ram.size(); ++i) ram[i] = static_cast<uint8_t>((i * 2654435761u + p * 40503u) >> 7);
      const std::string encoded = EncodePage(g, ram.data(), g.page_tokens);
      page_bytes = encoded.size();
      std::string name(PageHash::kSize, '\0');
      std::memcpy(name.data(), &p, sizeof(p));
      hashes.push_back(*PageHash::FromBytes(name));
      if (absl::Status s = files.Write(hashes.back(), encoded, /*sync=*/true); !s.ok()) {
        std::fprintf(stderr, "page file: %s\n", s.ToString().c_str());
        return 1;
      }
      offsets.push_back(RoundUp(std::ftell(out), kAlign));
      const std::string zeros(offsets.back() - std::ftell(out), '\0');
      std::fwrite(zeros.data(), 1, zeros.size(), out);
      std::fwrite(encoded.data(), 1, encoded.size(), out);
      crcs.push_back(Crc32c(encoded.data() + kPageHeaderBytes, encoded.size() - kPageHeaderBytes));
    }
    const bool written = std::fflush(out) == 0 && ::fsync(::fileno(out)) == 0;
    ::posix_fadvise(::fileno(out), 0, 0, POSIX_FADV_DONTNEED);
    std::fclose(out);
    if (!written || !files.SyncDir().ok()) return 1;
  }
  // Runs of consecutive pages of the one file, each at most request_bytes
  // (a page longer than that alone).
  std::vector<std::pair<size_t, size_t>> runs;  // [first, last] page
  for (size_t p = 0; p < offsets.size(); ++p) {
    if (!runs.empty() && offsets[p] + page_bytes - offsets[runs.back().first] <= request_bytes) {
      runs.back().second = p;
    } else {
      runs.push_back({p, p});
    }
  }

  // The pool: payloads (the in-RAM pages) at 4 KiB boundaries in huge-page
  // memory, headers apart, as the store's KV pool keeps them; a page's room
  // is its whole encoding rounded up, so the last row's reads fit in it.
  const size_t payload_bytes = page_bytes - kPageHeaderBytes;
  const size_t pool_stride = RoundUp(page_bytes, kAlign);
  PageFiles::DirectBuffer pool(pool_stride * n_pages + kAlign);
  std::vector<std::array<char, kPageHeaderBytes>> headers(n_pages);
  auto payload_of = [&](size_t p) { return pool.data() + p * pool_stride; };
  // Lands page p from `page` (its encoding): the copies and the check.
  auto land = [&](size_t p, const char* page) {
    std::memcpy(headers[p].data(), page, kPageHeaderBytes);
    std::memcpy(payload_of(p), page + kPageHeaderBytes, payload_bytes);
    return Crc32c(payload_of(p), payload_bytes) == crcs[p];
  };
  auto file_of = [&](size_t p) { return files.PathOf(hashes[p]); };
  const size_t page_buffer = RoundUp(page_bytes, kAlign) + kAlign;
  const size_t run_buffer = std::max<size_t>(request_bytes, page_bytes) + 2 * kAlign;

  struct Row {
    const char* name;
    size_t requests;
    // Reads everything; lands the pages if asked. Null: no such pass.
    std::function<bool(bool landed)> read;
    bool has_alone;
    std::vector<double> alone_ms, landed_ms;
  };
  std::vector<Row> rows = {
      {"page files, the store's read (PageFiles::ReadIntoDirect)", static_cast<size_t>(n_pages),
       [&](bool) {
         return OnReaders(readers, n_pages, page_bytes, [&](size_t p, PageFiles::DirectBuffer* buffer) {
           return files.ReadIntoDirect(hashes[p], headers[p].data(), kPageHeaderBytes, payload_of(p), payload_bytes,
                                       buffer)
                      .ok() &&
                  Crc32c(payload_of(p), payload_bytes) == crcs[p];
         });
       },
       false, {}, {}},
      {"page files, the store's read after its page-cache check (LikelyCached)", static_cast<size_t>(n_pages),
       [&](bool) {
         return OnReaders(readers, n_pages, page_bytes, [&](size_t p, PageFiles::DirectBuffer* buffer) {
           return !files.LikelyCached(hashes[p], page_bytes) &&
                  files.ReadIntoDirect(hashes[p], headers[p].data(), kPageHeaderBytes, payload_of(p), payload_bytes,
                                       buffer)
                      .ok() &&
                  Crc32c(payload_of(p), payload_bytes) == crcs[p];
         });
       },
       false, {}, {}},
      {"page files, a request each", static_cast<size_t>(n_pages),
       [&](bool landed) {
         return OnReaders(readers, n_pages, page_buffer, [&](size_t p, PageFiles::DirectBuffer* buffer) {
           return ReadDirect(file_of(p), 0, page_bytes, buffer->data()) && (!landed || land(p, buffer->data()));
         });
       },
       true, {}, {}},
      {"one file, a request a page", static_cast<size_t>(n_pages),
       [&](bool landed) {
         return OnReaders(readers, n_pages, page_buffer, [&](size_t p, PageFiles::DirectBuffer* buffer) {
           return ReadDirect(one_file, offsets[p], page_bytes, buffer->data()) && (!landed || land(p, buffer->data()));
         });
       },
       true, {}, {}},
      {"one file, runs of pages", runs.size(),
       [&](bool landed) {
         return OnReaders(readers, runs.size(), run_buffer, [&](size_t r, PageFiles::DirectBuffer* buffer) {
           const auto [first, last] = runs[r];
           if (!ReadDirect(one_file, offsets[first], offsets[last] + page_bytes - offsets[first], buffer->data())) {
             return false;
           }
           bool ok = true;
           for (size_t p = first; landed && p <= last; ++p) {
             ok = land(p, buffer->data() + (offsets[p] - offsets[first])) && ok;
           }
           return ok;
         });
       },
       true, {}, {}},
      {"page files, straight into the pool (no copy)", static_cast<size_t>(n_pages),
       [&](bool) {
         // The page's whole encoding lands at the start of its room in the
         // pool, its payload 48 bytes in.
         return OnReaders(readers, n_pages, kAlign, [&](size_t p, PageFiles::DirectBuffer*) {
           char* to = payload_of(p);
           return ReadDirect(file_of(p), 0, page_bytes, to) &&
                  Crc32c(to + kPageHeaderBytes, payload_bytes) == crcs[p];
         });
       },
       false, {}, {}},
  };
  for (int round = 0; round < rounds; ++round) {
    for (Row& row : rows) {
      for (bool landed : {false, true}) {
        if (!landed && !row.has_alone) continue;
        std::memset(pool.data(), 0, pool.size());
        const Clock::time_point start = Clock::now();
        if (!row.read(landed)) {
          std::fprintf(stderr, "%s: a read failed or a page's CRC-32C did not match (no O_DIRECT here?)\n",
                       row.name);
          return 1;
        }
        (landed ? row.landed_ms : row.alone_ms)
            .push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      }
    }
  }
  std::filesystem::remove_all(dir, ignored);

  const double total = static_cast<double>(page_bytes) * n_pages;
  std::printf("kvs-bench-page-reads: %s; CRC-32C %s; %d pages of %zu bytes (%.1f MB), %d readers, O_DIRECT, "
              "median of %d rounds\n\n",
              CpuModelName().c_str(), CrcName(), n_pages, page_bytes, total / 1e6, readers, rounds);
  std::printf("| pages read as | requests | reads alone: ms | GB/s | landed: ms | GB/s | landed vs the store's |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  const double base = Median(rows[0].landed_ms);
  for (const Row& row : rows) {
    std::string alone = "| - | -";
    if (row.has_alone) {
      char cell[64];
      std::snprintf(cell, sizeof(cell), "| %.1f | %.2f", Median(row.alone_ms), total / Median(row.alone_ms) / 1e6);
      alone = cell;
    }
    const double landed = Median(row.landed_ms);
    std::printf("| %s | %zu %s | %.1f | %.2f | %.2fx |\n", row.name, row.requests, alone.c_str(), landed,
                total / landed / 1e6, landed / base);
  }
  return 0;
}

}  // namespace
}  // namespace kvs

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return kvs::Run();
}
