#include "bench/startup_table.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/cpu_name.h"
#include "bench/median.h"
#include "bench/page_cache.h"
#include "client/kvsession_client.h"
#include "tests/server_process.h"

namespace kvs {
namespace {

namespace v1 = kvsession::v1;
using Clock = std::chrono::steady_clock;

// Session `index`'s prompt: `tokens` ids in [first, first + span), a
// different sequence for every index (so no two sessions share a page).
v1::CreateSessionRequest PromptOf(int index, int tokens, int first, int span) {
  v1::CreateSessionRequest create;
  uint64_t x = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(index + 1);
  for (int i = 0; i < tokens; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    create.mutable_input()->mutable_tokens()->add_ids(first + static_cast<int>(x % static_cast<uint64_t>(span)));
  }
  return create;
}

}  // namespace

int PrintStartupTable(const StartupTableOptions& o) {
  const std::string data = o.dir + "/startup_store";
  std::filesystem::remove_all(data);
  const std::vector<std::string> servers = o.servers.empty() ? std::vector<std::string>{""} : o.servers;
  auto server = std::make_unique<ServerProcess>(servers[0]);
  if (!server->Start(o.model, data, o.server_flags)) {
    std::cerr << "kvsessiond did not start:\n" << server->log();
    return 1;
  }
  int first = 0, span = 0;
  {
    KvSessionClient client(server->address());
    client.WaitForServer(std::chrono::seconds(10));
    absl::StatusOr<v1::ServerInfo> info = client.GetServerInfo();
    if (!info.ok()) {
      std::cerr << "GetServerInfo: " << info.status() << "\n";
      return 1;
    }
    // Ordinary tokens of any vocabulary: clear of the first ids (often
    // special) and of the last.
    first = std::min(100, info->model().vocab_size() / 4);
    span = std::max(1, info->model().vocab_size() / 2);
  }

  struct Row {
    int sessions;
    int64_t pages, page_bytes;
    std::vector<std::vector<double>> warm_ms, cold_ms;  // [server][repeat]
  };
  std::vector<Row> rows;
  int created = 0;
  for (int target : o.sessions) {
    // Fill the store up to `target` sessions, `clients` calls at a time.
    if (target > created) {
      std::atomic<int> next{created};
      std::atomic<bool> failed{false};
      std::vector<std::thread> threads;
      for (int c = 0; c < std::max(1, o.clients); ++c) {
        threads.emplace_back([&] {
          KvSessionClient client(server->address());
          for (int i; !failed && (i = next.fetch_add(1)) < target;) {
            absl::StatusOr<v1::Session> s = client.CreateSession(PromptOf(i, o.tokens, first, span));
            if (!s.ok()) {
              std::cerr << "CreateSession: " << s.status() << "\n";
              failed = true;
            }
          }
        });
      }
      for (std::thread& t : threads) t.join();
      if (failed) return 1;
      created = target;
    }
    Row row{.sessions = target,
            .pages = 0,
            .page_bytes = 0,
            .warm_ms = std::vector<std::vector<double>>(servers.size()),
            .cold_ms = std::vector<std::vector<double>>(servers.size())};
    // One restart by `binary`; `cold` drops the store from the page cache first.
    auto restart_ms = [&](const std::string& binary, bool cold) -> double {
      if (server->Stop() != 0) std::cerr << "server did not stop cleanly\n";
      SetPageCached(data, !cold);
      std::this_thread::sleep_for(std::chrono::seconds(o.pause_s));
      server = std::make_unique<ServerProcess>(binary);
      const Clock::time_point t0 = Clock::now();
      if (!server->Start(o.model, data, o.server_flags)) {
        std::cerr << "kvsessiond did not start:\n" << server->log();
        return -1;
      }
      KvSessionClient client(server->address());
      absl::StatusOr<v1::ServerInfo> info;
      while (Clock::now() - t0 < std::chrono::seconds(120)) {
        info = client.GetServerInfo();
        if (info.ok()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (!info.ok() || info->store().sessions() != target) {
        std::cerr << "after the restart the store holds " << (info.ok() ? info->store().sessions() : -1)
                  << " sessions, not " << target << "\n";
        return -1;
      }
      row.pages = info->store().pages();
      row.page_bytes = info->store().page_bytes();
      return ms;
    };
    for (int r = 0; r < o.repeats; ++r) {
      for (size_t b = 0; b < servers.size(); ++b) {
        const double warm = restart_ms(servers[b], false), cold = restart_ms(servers[b], true);
        if (warm < 0 || cold < 0) return 1;
        row.warm_ms[b].push_back(warm);
        row.cold_ms[b].push_back(cold);
      }
    }
    rows.push_back(std::move(row));
  }
  server->Stop();
  std::filesystem::remove_all(data);

  std::printf("\nstart-up: from the process's start until GetServerInfo answers with every session loaded, "
              "%s, median of %d%s\n",
              CpuModelName().c_str(), o.repeats,
              o.pause_s > 0 ? absl::StrCat(", ", o.pause_s, " s before each start").c_str() : "");
  for (size_t b = 0; b < servers.size() && servers.size() > 1; ++b) {
    std::printf("build %zu: %s\n", b + 1, servers[b].c_str());
  }
  std::string header = "| sessions | tokens each | pages stored | stored MB |", rule = "|---|---|---|---|";
  for (size_t b = 0; b < servers.size(); ++b) {
    const std::string which = servers.size() > 1 ? absl::StrCat(" (", b + 1, ")") : "";
    absl::StrAppend(&header, " warm ms", which, " | cold ms", which, " |");
    rule += "---|---|";
  }
  for (size_t b = 1; b < servers.size(); ++b) {
    absl::StrAppend(&header, " warm ", b + 1, "/1 | cold ", b + 1, "/1 |");
    rule += "---|---|";
  }
  std::printf("%s\n%s\n", header.c_str(), rule.c_str());
  for (const Row& row : rows) {
    std::printf("| %d | %d | %lld | %.1f |", row.sessions, o.tokens, static_cast<long long>(row.pages),
                static_cast<double>(row.page_bytes) / 1e6);
    for (size_t b = 0; b < servers.size(); ++b) {
      std::printf(" %.0f | %.0f |", Median(row.warm_ms[b]), Median(row.cold_ms[b]));
    }
    for (size_t b = 1; b < servers.size(); ++b) {
      std::printf(" %.2f | %.2f |", Median(row.warm_ms[b]) / Median(row.warm_ms[0]),
                  Median(row.cold_ms[b]) / Median(row.cold_ms[0]));
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace kvs
