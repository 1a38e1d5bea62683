#include "bench/restore_table.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/cpu_name.h"
#include "bench/median.h"
#include "bench/page_cache.h"
#include "client/kvsession_client.h"
#include "tests/server_process.h"

namespace kvs {
namespace {

namespace v1 = kvsession::v1;
using Clock = std::chrono::steady_clock;

}  // namespace

int PrintRestoreTable(const RestoreTableOptions& o) {
  const std::string data = o.dir + "/restore_store";
  std::filesystem::remove_all(data);
  // A 512 MiB pool per 4,096 tokens of session: room for it, and quick to
  // prefault.
  std::vector<std::string> flags = o.server_flags;
  const int pool_mb = 512 * ((std::max(o.tokens, 4096) + 4095) / 4096);
  flags.insert(flags.end(), {"--kv-cache-mb", std::to_string(pool_mb)});
  // The pools compared, rows of the table: the flags each adds.
  const std::vector<std::pair<std::string, std::vector<std::string>>> pools = {
      {"fresh memory (--kv-warm-tokens 0)", {"--kv-warm-tokens", "0"}},
      {"default (4,096 tokens, or the longest stored session, kept warm)", {}},
      {"--kv-prefault", {"--kv-prefault"}},
  };
  auto server = std::make_unique<ServerProcess>();
  size_t pool = 1;
  auto start = [&]() -> bool {
    server = std::make_unique<ServerProcess>();
    std::vector<std::string> f = flags;
    f.insert(f.end(), pools[pool].second.begin(), pools[pool].second.end());
    if (!server->Start(o.model, data, f)) {
      std::cerr << "kvsessiond did not start:\n" << server->log();
      return false;
    }
    return true;
  };
  if (!start()) return 1;
  std::string id;
  int tokens = 0;
  int64_t page_bytes = 0;
  {
    KvSessionClient client(server->address());
    client.WaitForServer(std::chrono::seconds(10));
    v1::CreateSessionRequest create;
    for (int i = 0; i < o.tokens; ++i) {
      create.mutable_input()->mutable_tokens()->add_ids(100 + static_cast<int>((i * 2654435761u) % 900));
    }
    absl::StatusOr<v1::Session> s = client.CreateSession(create);
    if (!s.ok()) {
      std::cerr << "CreateSession(long): " << s.status() << "\n";
      return 1;
    }
    id = s->id();
    tokens = s->length();
    page_bytes = client.GetServerInfo()->store().page_bytes();
  }
  const double bandwidth = MeasureColdReadBandwidth(
      o.dir + "/bandwidth_probe", std::max<int64_t>(page_bytes, int64_t{256} << 20), 3);

  // One restore after a restart; `cold` drops the store from the page cache first.
  auto restore_ms = [&](bool cold) -> double {
    if (server->Stop() != 0) std::cerr << "server did not stop cleanly\n";
    SetPageCached(data, !cold);
    if (!start()) return -1;
    KvSessionClient client(server->address());
    client.WaitForServer(std::chrono::seconds(10));
    const auto t0 = Clock::now();
    absl::StatusOr<v1::Session> s = client.RestoreSession(id);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (!s.ok()) {
      std::cerr << "RestoreSession: " << s.status() << "\n";
      return -1;
    }
    return ms;
  };
  std::vector<std::vector<double>> warm(pools.size()), cold(pools.size());
  for (int r = 0; r < o.repeats; ++r) {  // interleaved, so all see the same load
    for (size_t p = 0; p < pools.size(); ++p) {
      pool = p;
      const double w = restore_ms(false), c = restore_ms(true);
      if (w < 0 || c < 0) return 1;
      warm[p].push_back(w);
      cold[p].push_back(c);
    }
  }
  server->Stop();
  std::filesystem::remove_all(data);

  const double mb = static_cast<double>(page_bytes) / 1e6;
  const double cold_target = bandwidth > 0 ? 1.3 * static_cast<double>(page_bytes) / bandwidth * 1000 : 0;
  constexpr double kWarmTarget = 60;
  std::printf("\nrestore after a restart, %s, median of %d\n", CpuModelName().c_str(), o.repeats);
  std::printf("| KV pool | session tokens | MB | warm ms | cold ms | disk MB/s (measured) | cold target ms | cold | "
              "warm target ms | warm |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t p = 0; p < pools.size(); ++p) {
    const double warm_ms = Median(warm[p]), cold_ms = Median(cold[p]);
    std::printf("| %s | %d | %.1f | %.1f | %.1f | %.0f | %.1f | %s | %.0f | %s |\n",
                pools[p].first.c_str(), tokens, mb, warm_ms, cold_ms,
                bandwidth / 1e6, cold_target, cold_ms <= cold_target ? "pass" : "miss",
                kWarmTarget, warm_ms <= kWarmTarget ? "pass" : "miss");
  }
  return 0;
}

}  // namespace kvs
