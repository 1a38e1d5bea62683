#include "tools/load/load_controller.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/kvsession_client.h"
#include "tests/server_process.h"
#include "tools/load/load_worker.h"
#include "tools/load/page_cache_dropper.h"
#include "tools/load/rss_sampler.h"

namespace kvs::load {
namespace v1 = kvsession::v1;
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kTick = std::chrono::milliseconds(50);
constexpr auto kRssPeriod = std::chrono::seconds(1);
// How long calls may take to fail once the server is gone.
constexpr absl::Duration kQuietTimeout = absl::Seconds(60);
// Kills fall in [kFirstKill, kLastKill] of the duration.
constexpr double kFirstKill = 0.1;
constexpr double kLastKill = 0.9;
constexpr size_t kMaxLogTail = 2000;
// Surviving sessions per tenant read with another tenant's key at each check.
constexpr size_t kIsolationProbes = 16;

std::string Tail(const std::string& s) {
  return s.size() <= kMaxLogTail ? s : s.substr(s.size() - kMaxLogTail);
}

}  // namespace

LoadController::LoadController(LoadOptions options)
    : options_(std::move(options)), rng_(options_.seed) {
  data_dir_ = options_.work_dir + "/data";
  report_.model = options_.model;
  report_.clients = options_.clients;
  report_.duration_s = std::chrono::duration<double>(options_.duration).count();
  report_.kills_planned = options_.kills;
  report_.seed = options_.seed;
  report_.tenants = options_.tenants;
  report_.tls = options_.tls;
  if (!options_.tenant_quotas.empty()) {
    report_.tenant_quota = FormatLoadQuotas(options_.tenant_quotas);
  }
  for (const std::string& op : options_.skipped_ops) {
    report_.skipped_ops += (report_.skipped_ops.empty() ? "" : ",") + op;
  }
}

LoadController::~LoadController() = default;

double LoadController::SecondsSinceStart() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

bool LoadController::StartServer() {
  ++server_run_;
  server_ = std::make_unique<ServerProcess>();
  std::vector<std::string> flags = {"--threads", std::to_string(options_.server_threads)};
  flags.insert(flags.end(), options_.server_args.begin(), options_.server_args.end());
  flags.insert(flags.end(), identities_.server_flags.begin(), identities_.server_flags.end());
  if (!server_->Start(options_.model, data_dir_, flags)) {
    report_.fatal = absl::StrCat("kvsessiond (run ", server_run_, ") did not start; its log ends:\n",
                                 Tail(server_->log()));
    return false;
  }
  return true;
}

void LoadController::SampleRss() {
  if (!server_ || !server_->Running()) return;
  if (std::optional<int64_t> kib = ReadVmRssKiB(server_->pid())) {
    report_.rss.push_back({SecondsSinceStart(), server_run_, *kib});
  }
}

void LoadController::DescribeServer() {
  KvSessionClient client(server_->address(), identities_.admin.security);
  absl::StatusOr<v1::ServerInfo> info = client.GetServerInfo();
  if (!info.ok()) return;
  const v1::KvCacheInfo& kv = info->kv_cache();
  const v1::StoreInfo& store = info->store();
  auto mib = [](int64_t bytes) { return absl::StrCat(bytes / (1024 * 1024), " MiB"); };
  report_.end_state = absl::StrCat(
      "run ", server_run_, ": ", info->sessions(), " sessions (", info->resident_sessions(),
      " resident); KV pages in use ", kv.pages_in_use(), " (", mib(kv.bytes_in_use()),
      "), cached ", kv.pages_cached(), ", budget ", kv.max_pages(), " (", mib(kv.max_pages() * kv.page_bytes()),
      "); store ", store.sessions(), " sessions, ", store.checkpoints(), " checkpoints, ",
      store.pages(), " pages (", mib(store.page_bytes()), ")");
}

void LoadController::Check() {
  std::vector<std::unique_ptr<KvSessionClient>> clients;
  for (const Caller& caller : identities_.tenants) {
    clients.push_back(std::make_unique<KvSessionClient>(server_->address(), caller.security));
  }
  clients.front()->WaitForServer(std::chrono::seconds(10));
  for (size_t t = 0; t < clients.size(); ++t) CheckTenant(t, *clients[t], *clients[(t + 1) % clients.size()]);
}

void LoadController::CheckTenant(size_t t, KvSessionClient& own, KvSessionClient& next) {
  ServerView view;
  auto unexpected = [&](const std::string& method, const absl::Status& st) {
    stats_.RecordError(method, st, {ErrorKind::kOther, false});
  };
  auto breach = [&](const std::string& what) {
    ++report_.isolation_breaches;
    if (report_.verify.problems.size() < 20) report_.verify.problems.push_back(what);
  };
  SessionLedger& ledger = *ledgers_[t];
  std::vector<std::string> surviving;
  for (const std::string& id : ledger.SessionsToCheck()) {
    absl::StatusOr<v1::Session> s = own.GetSession(id, /*include_tokens=*/true);
    if (s.ok()) {
      view.sessions[id] = std::vector<int32_t>(s->token_ids().begin(), s->token_ids().end());
      surviving.push_back(id);
    } else if (absl::IsNotFound(s.status())) {
      view.sessions[id] = std::nullopt;
    } else {
      unexpected("check: GetSession", s.status());
    }
  }
  std::string page_token;
  do {
    v1::ListCheckpointsRequest req;
    req.set_page_size(1000);
    req.set_page_token(page_token);
    v1::ListCheckpointsResponse resp;
    grpc::ClientContext ctx;
    own.PrepareContext(&ctx);  // the tenant's key
    absl::Status st = FromGrpc(own.stub()->ListCheckpoints(&ctx, req, &resp));
    if (!st.ok()) {
      unexpected("check: ListCheckpoints", st);
      break;
    }
    for (const v1::Checkpoint& c : resp.checkpoints()) {
      view.checkpoints[c.id()] = c.length();
      for (size_t u = 0; u < ledgers_.size(); ++u) {
        if (u != t && ledgers_[u]->Tracks(c.id())) {
          breach(absl::StrCat("check: tenant ", t, " lists checkpoint ", c.id(), " of tenant ", u));
        }
      }
    }
    page_token = resp.next_page_token();
  } while (!page_token.empty());
  CheckQuota(t, own, view.checkpoints.size());
  if (&own != &next) {
    // The sessions' owners survived the restart: another tenant's key finds none.
    for (size_t i = 0; i < surviving.size() && i < kIsolationProbes; ++i) {
      absl::StatusOr<v1::Session> s = next.GetSession(surviving[i], /*include_tokens=*/false);
      ++report_.isolation_checked;
      if (s.ok()) {
        breach(absl::StrCat("check: tenant ", t, "'s session ", surviving[i], " is readable by another tenant"));
      } else if (!absl::IsNotFound(s.status())) {
        unexpected("check: GetSession:foreign", s.status());
      }
    }
  }
  VerifyResult v = ledger.Verify(view);
  report_.verify.checked += v.checked;
  report_.verify.lost += v.lost;
  report_.verify.phantom += v.phantom;
  for (std::string& p : v.problems) {
    if (report_.verify.problems.size() < 20) report_.verify.problems.push_back(std::move(p));
  }
}

void LoadController::CheckQuota(size_t t, KvSessionClient& own, size_t checkpoints) {
  std::optional<int64_t> sessions;        // listed on first need
  std::optional<v1::TenantInfo> usage;    // GetServerInfo's, on first need
  for (const LoadQuota& quota : identities_.tenants[t].quotas) {
    int64_t held = static_cast<int64_t>(checkpoints);
    if (quota.name == "max_sessions") {
      if (!sessions) {
        absl::StatusOr<std::vector<v1::Session>> listed = own.ListAllSessions();
        if (!listed.ok()) {
          stats_.RecordError("check: ListSessions", listed.status(), {ErrorKind::kOther, false});
          continue;
        }
        sessions = static_cast<int64_t>(listed->size());
      }
      held = *sessions;
    } else if (quota.name == "max_store_bytes" || quota.name == "max_kv_bytes") {
      // The server's own count, as the tenant's key reads it: after a restart
      // the store bytes are recounted from the records the store holds, apart
      // from the running counts that admitted the calls before the kill.
      if (!usage) {
        absl::StatusOr<v1::ServerInfo> info = own.GetServerInfo();
        if (!info.ok()) {
          stats_.RecordError("check: GetServerInfo", info.status(), {ErrorKind::kOther, false});
          continue;
        }
        usage = info->tenant();
      }
      held = quota.name == "max_store_bytes" ? usage->store_bytes().usage() : usage->kv_bytes().usage();
    } else if (quota.name != "max_checkpoints") {
      continue;  // max_generates: nothing is held across a restart
    }
    ++report_.quota_checked;
    if (held > quota.limit) {
      ++report_.quota_breaches;
      if (report_.verify.problems.size() < 20) {
        report_.verify.problems.push_back(absl::StrCat("check: tenant ", identities_.tenants[t].tenant, " holds ",
                                                       held, " under its quota ", quota.name, "=", quota.limit));
      }
    }
  }
}

std::chrono::duration<double, std::milli> LoadController::DropDataFromPageCache() {
  const auto start = Clock::now();
  ++report_.page_cache_drops;
  report_.files_dropped += DropPageCache(data_dir_);
  const std::chrono::duration<double, std::milli> took = Clock::now() - start;
  report_.drop_ms.push_back(took.count());
  return took;
}

bool LoadController::RestartAndCheck(Cycle why) {
  link_.MarkDown();
  const auto down = Clock::now();
  if (why == Cycle::kUnexpectedExit) {
    ++report_.unexpected_exits;
    report_.exit_notes.push_back(absl::StrCat("run ", server_run_, " exited at ",
                                              static_cast<int>(SecondsSinceStart()),
                                              " s; its log ends:\n", Tail(server_->log())));
  } else {
    server_->Kill();
  }
  if (!link_.WaitQuiet(kQuietTimeout)) {
    report_.hung = true;
    report_.fatal = "client calls did not end within 60 s of the kill";
    return false;
  }
  std::error_code ignored;  // keep each run's log apart
  std::filesystem::rename(data_dir_ + ".log", absl::StrCat(data_dir_, ".run", server_run_, ".log"),
                          ignored);
  // The drop writes back what the killed server left dirty; it is the
  // tool's work, not the server's, so it is timed apart (drop_ms).
  std::chrono::duration<double, std::milli> dropping{0};
  if (options_.drop_page_cache_every.count() > 0) dropping = DropDataFromPageCache();
  if (!StartServer()) return false;
  const std::chrono::duration<double, std::milli> down_for = Clock::now() - down;
  report_.restart_ms.push_back((down_for - dropping).count());
  Check();
  if (why == Cycle::kKill) ++report_.kills;
  if (why != Cycle::kFinal) link_.MarkUp(server_->address());
  return true;
}

LoadReport LoadController::Run() {
  std::filesystem::create_directories(options_.work_dir);
  absl::StatusOr<LoadIdentities> identities = MakeLoadIdentities(options_.work_dir, options_.tenants, options_.tls,
                                                                     options_.tenant_quotas);
  if (!identities.ok()) {
    report_.fatal = std::string(identities.status().message());
    return report_;
  }
  identities_ = *std::move(identities);
  for (size_t t = 0; t < identities_.tenants.size(); ++t) ledgers_.push_back(std::make_unique<SessionLedger>());
  start_ = Clock::now();
  if (!StartServer()) return report_;
  KvSessionClient probe(server_->address(), identities_.admin.security);
  probe.WaitForServer(std::chrono::seconds(10));
  absl::StatusOr<v1::ServerInfo> info = probe.GetServerInfo();
  if (!info.ok()) {
    report_.fatal = absl::StrCat("GetServerInfo failed: ", info.status().ToString());
    return report_;
  }
  if (options_.chat_fraction > 0 && info->model().chat_template().empty()) {
    // Chat messages need a template the server knows: without one every
    // chat call fails alike, so the run stops here and says why instead of
    // loading the server with calls that cannot succeed.
    report_.fatal =
        "--chat-fraction: the server takes no chat messages (its ServerInfo names no chat template; give a model "
        "with a chat template, or --server-args \"--chat-template chatml\")";
    return report_;
  }
  WorkloadOptions work;
  work.target_sessions = options_.target_sessions > 0 ? options_.target_sessions : options_.clients;
  work.max_session_tokens = info->limits().max_context() / 2;
  work.vocab_size = info->model().vocab_size();
  work.bos_token_id = info->model().bos_token_id();
  work.cancel_fraction = options_.cancel_fraction;
  work.chat_fraction = options_.chat_fraction;
  work.strict_busy = options_.strict_busy;
  work.skipped_ops = options_.skipped_ops;

  // The kill moments, at random within the duration.
  std::vector<Clock::duration> kill_at;
  std::uniform_real_distribution<double> when(kFirstKill, kLastKill);
  for (int i = 0; i < options_.kills; ++i) {
    kill_at.push_back(std::chrono::duration_cast<Clock::duration>(options_.duration * when(rng_)));
  }
  std::sort(kill_at.begin(), kill_at.end());

  link_.MarkUp(server_->address());
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<LoadWorker>> workers;
  std::vector<std::thread> threads;
  // The pool of sessions is per tenant: each tenant's clients share about
  // as many sessions as they are.
  const size_t tenants = identities_.tenants.size();
  work.target_sessions = std::max<int>(1, work.target_sessions / static_cast<int>(tenants));
  for (int i = 0; i < options_.clients; ++i) {
    const size_t t = static_cast<size_t>(i) % tenants;
    std::vector<SessionLedger*> others;
    for (size_t u = 0; u < tenants; ++u) {
      if (u != t) others.push_back(ledgers_[u].get());
    }
    workers.push_back(std::make_unique<LoadWorker>(rng_(), work, identities_.tenants[t], link_, *ledgers_[t],
                                                   std::move(others), stats_));
    threads.emplace_back([w = workers.back().get(), &stop] { w->Run(stop); });
  }
  const auto load_start = Clock::now();
  auto next_rss = load_start + kRssPeriod;
  auto next_drop = load_start + options_.drop_page_cache_every;
  size_t next_kill = 0;
  bool ok = true;
  while (ok && Clock::now() - load_start < options_.duration) {
    std::this_thread::sleep_for(kTick);
    if (!server_->Running()) {
      ok = RestartAndCheck(Cycle::kUnexpectedExit);
    } else if (next_kill < kill_at.size() && Clock::now() - load_start >= kill_at[next_kill]) {
      ++next_kill;
      ok = RestartAndCheck(Cycle::kKill);
    }
    if (Clock::now() >= next_rss) {
      SampleRss();
      next_rss += kRssPeriod;
    }
    if (options_.drop_page_cache_every.count() > 0 && Clock::now() >= next_drop) {
      DropDataFromPageCache();
      next_drop = Clock::now() + options_.drop_page_cache_every;
    }
  }
  report_.load_s = std::chrono::duration<double>(Clock::now() - load_start).count();
  stop = true;  // workers stop once their current call ends
  for (std::thread& t : threads) t.join();
  if (server_->Running()) DescribeServer();
  if (ok) ok = RestartAndCheck(server_->Running() ? Cycle::kFinal : Cycle::kUnexpectedExit);
  if (ok) {
    const int code = server_->Stop();
    if (code != 0) {
      ++report_.unexpected_exits;
      report_.exit_notes.push_back(absl::StrCat("SIGTERM stop exited with ", code, "; log ends:\n",
                                                Tail(server_->log())));
    }
  }
  report_.methods = stats_.Methods();
  report_.errors = stats_.Errors();
  report_.ttft_ms = stats_.TtftMs();
  report_.generated_tokens = stats_.generated_tokens();
  report_.cancels = stats_.cancels();
  report_.unexpected_errors = stats_.unexpected_errors();
  report_.unexpected_samples = stats_.UnexpectedSamples();
  return report_;
}

}  // namespace kvs::load
