// kvs-bench-tenants: what a tenant's quota figures cost as its sessions
// grow (service/tenant_usage.h). In one process, as kvsessiond runs them:
// a real model, page pool, RocksDB store and SessionManager. The tenant's
// sessions are forks of one prompt, resident, as best-of-N leaves them:
// each record references the prompt's pages, and each table holds them.
//
//   build/bin/kvs-bench-tenants --model M.gguf [--sessions 64,512,4096]
//       [--prompt 480] [--repeats 21] [--dir /tmp]
//
// For each count of sessions the tenant owns, medians in ms of:
//   Usage       TenantUsage::Usage, the per-tenant figures GetServerInfo
//               and the metrics show (kv_bytes, store_bytes, ...);
//   AdmitJob    the admission of a Generate on one of the sessions with
//               max_kv_bytes and max_store_bytes set (neither reached);
//   recounts    the store bytes and the KV pages counted from scratch, as
//               AdmitJob and Usage counted them on every call before the
//               registry and the page pool kept them
//               (service/tenant_usage_recount.h): the parts taken out; and
//               whether the kept figures equal them.
// Both quota checks hold one server-wide mutex, so their cost delays every
// tenant's admissions.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "bench/cpu_name.h"
#include "cache/session_store.h"
#include "client/cli_args.h"
#include "kernels/cpu_features.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "model/transformer.h"
#include "service/auth/tenant_quotas.h"
#include "service/session_manager.h"
#include "service/tenant_usage.h"
#include "service/tenant_usage_recount.h"

namespace kvs {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <typename F>
double MedianMs(int repeats, F&& f) {
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = Clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return Median(ms);
}

int Fail(const absl::Status& status) {
  std::cerr << "kvs-bench-tenants: " << status << "\n";
  return 1;
}

std::vector<int> ParseCounts(const std::string& list) {
  std::vector<int> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoi(item));
  std::sort(out.begin(), out.end());
  return out;
}

int Run(const CliArgs& args) {
  const std::string model_path = *args.Get("model");
  const std::vector<int> counts = ParseCounts(args.GetOr("sessions", "64,512,4096"));
  const int prompt = static_cast<int>(args.GetInt("prompt", 480).value_or(480));
  const int repeats = static_cast<int>(args.GetInt("repeats", 21).value_or(21));
  const std::string dir = args.GetOr("dir", "/tmp") + "/kvs-bench-tenants";
  std::filesystem::remove_all(dir);

  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(model_path);
  if (!model.ok()) {
    std::cerr << model.status() << "\n";
    return 1;
  }
  ServiceLimits limits;
  limits.max_context = (*model)->config().context_length;
  limits.max_sessions = counts.back() + 16;
  if (prompt + 1 >= limits.max_context) {
    std::cerr << "--prompt must be below the model's context (" << limits.max_context << ")\n";
    return 2;
  }
  ThreadPool threads(1);
  Transformer transformer((*model)->config(), (*model)->weights(), &threads, 128, limits.max_context);
  PagePool pool(transformer.kv_geometry(16, KvDtype::kF16), 4096);
  StoreOptions store_options;
  store_options.sync_writes = false;
  absl::StatusOr<std::unique_ptr<SessionStore>> store = SessionStore::Open(dir, store_options);
  if (!store.ok()) {
    std::cerr << store.status() << "\n";
    return 1;
  }
  SessionManager sessions(**model, &pool, store->get(), std::string(32, 'f'), limits);
  if (absl::Status st = sessions.LoadFromStore(); !st.ok()) return Fail(st);
  QuotaLimits generous;
  generous.max_kv_bytes = int64_t{1} << 50;
  generous.max_store_bytes = int64_t{1} << 50;
  TenantQuotas quotas(generous);
  TenantUsage usage(&sessions, &quotas);

  // The prompt, prefilled once and persisted.
  absl::StatusOr<std::shared_ptr<Session>> source = sessions.CreateAcquired({}, {}, "acme");
  if (!source.ok()) {
    std::cerr << source.status() << "\n";
    return 1;
  }
  {
    SessionKv kv = sessions.OpenKv(**source);
    std::vector<int32_t> tokens;
    for (int i = 0; i < prompt; ++i) tokens.push_back(10 + i % 200);
    kv.ReserveCapacity(static_cast<int>(tokens.size()));
    (*source)->AppendTokens(tokens);
    std::vector<float> logits((*model)->config().vocab_size);
    while (kv.lag() > 0) {
      const int n = std::min(kv.lag(), 64);
      if (absl::Status st = kv.Reserve(n); !st.ok()) return Fail(st);
      ForwardItem item = kv.Item(n, Logits::kNone);
      if (absl::Status st = transformer.Forward({&item, 1}, logits.data()); !st.ok()) return Fail(st);
      kv.Commit();
    }
  }
  if (absl::Status st = sessions.PersistAndRelease(*source); !st.ok()) return Fail(st);
  const std::string source_id = (*source)->id;

  std::printf("kvs-bench-tenants: %s; kernels %s\n", CpuModelName().c_str(), ActiveKernelsName());
  std::printf("model %s; one tenant's sessions: forks of a %d-token prompt (%d pages each), resident; "
              "medians of %d, ms\n\n",
              std::filesystem::path(model_path).filename().c_str(), prompt + 1, (prompt + 16) / 16, repeats);
  std::printf("| sessions owned | Usage | AdmitJob (kv and store quotas) | recount of store bytes (before) | "
              "recount of KV pages (before) | kept = recounts |\n|---|---|---|---|---|---|\n");
  int owned = 1;
  for (int target : counts) {
    while (owned < target) {
      const int n = std::min(64, target - owned);
      absl::StatusOr<std::vector<std::shared_ptr<Session>>> forks = sessions.Fork(source_id, n, {}, {});
      if (!forks.ok()) {
        std::cerr << forks.status() << "\n";
        return 1;
      }
      owned += n;
    }
    const double usage_ms = MedianMs(repeats, [&] { (void)usage.Usage("acme"); });
    absl::StatusOr<std::shared_ptr<Session>> held = sessions.Acquire(source_id, "Generate", absl::Now());
    if (!held.ok()) return Fail(held.status());
    const double admit_ms = MedianMs(repeats, [&] {
      absl::StatusOr<std::shared_ptr<TenantClaim>> job = usage.AdmitJob(**held, 64, true);
      if (!job.ok()) std::cerr << job.status() << "\n";
    });
    sessions.Release(*held);
    int64_t recounted = 0, recounted_pages = 0;
    const double recount_ms = MedianMs(repeats, [&] { recounted = RecountStoreBytes(sessions, "acme"); });
    const double recount_kv_ms = MedianMs(repeats, [&] { recounted_pages = RecountKvPages(sessions, "acme"); });
    const TenantUsageFigures kept = usage.Usage("acme");
    const bool same = recounted == kept.store_bytes &&
                      recounted_pages * static_cast<int64_t>(pool.geometry().page_bytes()) == kept.kv_bytes;
    std::printf("| %d | %.4f | %.4f | %.3f | %.3f | %s |\n", owned, usage_ms, admit_ms, recount_ms, recount_kv_ms,
                same ? "yes" : "NO");
  }
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace kvs

int main(int argc, char** argv) {
  absl::StatusOr<kvs::CliArgs> args = kvs::CliArgs::Parse(std::vector<std::string>(argv + 1, argv + argc),
                                                          {"model", "sessions", "prompt", "repeats", "dir"}, {});
  if (!args.ok() || !args->Has("model")) {
    std::cerr << (args.ok() ? "" : std::string(args.status().message()) + "\n")
              << "usage: kvs-bench-tenants --model M.gguf [--sessions 64,512,4096] [--prompt 480] "
                 "[--repeats 21] [--dir /tmp]\n";
    return 2;
  }
  return kvs::Run(*args);
}
