// kvs-load: a load and crash tool for kvsessiond (issue 8).
//
//   kvs-load --model M.gguf [--clients 64] [--duration 30s] [--kills 3] ...
//
// Starts the real kvsessiond (build/bin/kvsessiond) on a loopback port, runs
// concurrent clients against it, kills -9 and restarts it at random moments,
// checks that every acknowledged call survived, prints a report and exits
// 0 (PASS), 1 (FAIL: lost acknowledged calls, unexpected errors or server
// exits) or 2 (bad flags).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/cli_args.h"
#include "tools/load/error_classifier.h"
#include "tools/load/load_controller.h"
#include "tools/load/load_worker.h"

namespace {

constexpr char kUsage[] =
    "usage: kvs-load --model M.gguf [flags]\n"
    "\n"
    "Runs concurrent clients (Create, Append, Generate, Fork, Snapshot, Restore, Get,\n"
    "List, Delete, Truncate) against a real kvsessiond on 127.0.0.1, kills -9 the server\n"
    "at random moments and restarts it on the same data directory, and checks after each\n"
    "restart (and once more at the end) that every acknowledged call survived: each\n"
    "session holds exactly the tokens of its last acknowledged Append/Generate/Truncate\n"
    "(more only if an unacknowledged call was in flight), acknowledged Fork branches and\n"
    "Snapshot checkpoints exist with their lengths, acknowledged Deletes stay deleted.\n"
    "A Truncate runs alone on its session (the tool's other clients leave it be).\n"
    "Reports TTFT p50/p99, tokens/s, errors by method and gRPC code, server RSS.\n"
    "\n"
    "flags:\n"
    "  --model PATH           GGUF model (required; e.g. ../shared/models/aidreams260K.gguf)\n"
    "  --clients N            concurrent clients (default 64)\n"
    "  --duration D           load time, e.g. 30s, 10m, or seconds (default 30s)\n"
    "  --kills N              kill -9 + restart N times during the run (default 3; 0 =\n"
    "                         load only, still one final kill and check)\n"
    "  --sessions N           sessions the clients share (default: --clients)\n"
    "  --cancel-fraction F    Generates cancelled after their first token (default 0.05)\n"
    "  --chat-fraction F      Appends sent as a user chat message of random words, and\n"
    "                         Creates as a system and a user message (default 0; the\n"
    "                         model needs a chat template, or pass --server-args\n"
    "                         \"--chat-template chatml\"; without one the run stops\n"
    "                         before the load, FATAL; each is counted by Tokenize\n"
    "                         first, and the session cap counts its markup)\n"
    "  --server-threads N     kvsessiond --threads (default 2)\n"
    "  --server-args \"A B\"    more kvsessiond flags, split on spaces (e.g.\n"
    "                         \"--kv-cache-mb 64\", to see RSS level off at the pool)\n"
    "  --seed N               random seed of the workload and kill moments (default 1)\n"
    "  --work-dir DIR         data directory and logs (default: a fresh temporary\n"
    "                         directory, removed after a passing run)\n"
    "  --summary-json PATH    also write the figures as JSON\n"
    "  --skip-ops A,B,...     operations not to run: append, generate, fork, snapshot,\n"
    "                         restore, restore-session, get, list, delete,\n"
    "                         delete-checkpoint, truncate, foreign-get (create always runs;\n"
    "                         sessions near half the context are deleted even with delete\n"
    "                         skipped)\n"
    "  --strict-busy          count \"busy\" with no conflicting call as unexpected\n"
    "  --drop-page-cache D    every D (e.g. 2s), and before each restart, drop the server's\n"
    "                         data directory from the page cache (posix_fadvise DONTNEED),\n"
    "                         so restores read cold: page files straight from the disk;\n"
    "                         the report times the drops apart from kill-to-serving-again\n"
    "  --tenants N            give the server an --auth-keys file of N user tenants and an\n"
    "                         admin, each with a fresh random key; client i calls as tenant\n"
    "                         i mod N with its key, on that tenant's own sessions, and\n"
    "                         checks isolation: another tenant's session must be NOT_FOUND\n"
    "                         (foreign-get) and never listed; at every restart each tenant\n"
    "                         is checked with its own key, and its surviving sessions must\n"
    "                         be NOT_FOUND with the next tenant's (default 0: no keys)\n"
    "  --tenant-quota Q[,Q]   give tenant load-t0 (of --tenants, at least 2) the keys file's\n"
    "                         quotas, e.g. max_sessions=4 or max_sessions=4,max_store_bytes=\n"
    "                         300000: its calls past a limit must be RESOURCE_EXHAUSTED\n"
    "                         \"tenant quota\" (expected), every other tenant's never; each\n"
    "                         restart also checks load-t0 holds no more than each limit\n"
    "                         (sessions and checkpoints as listed, store and KV bytes as\n"
    "                         the server counts them; not max_generates);\n"
    "                         with max_sessions, load-t0's clients keep it near the limit;\n"
    "                         after a max_store_bytes refusal a client deletes first\n"
    "  --tls                  serve and call over TLS, with certificates made by the openssl\n"
    "                         command in the work directory\n"
    "\n"
    "exit status: 0 PASS, 1 FAIL (lost acknowledged calls, unexpected errors, server\n"
    "exits the tool did not cause), 2 bad flags or setup.\n"
    "\n";

int Usage(const std::string& error) {
  if (!error.empty()) std::cerr << "kvs-load: " << error << "\n\n";
  std::cerr << kUsage << kvs::load::kClassificationRules;
  return 2;
}

bool ParseDuration(const std::string& text, std::chrono::milliseconds* out) {
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds)) {
    *out = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
    return seconds > 0;
  }
  absl::Duration d;
  if (!absl::ParseDuration(text, &d) || d <= absl::ZeroDuration()) return false;
  *out = std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<kvs::CliArgs> args = kvs::CliArgs::Parse(
      std::vector<std::string>(argv + 1, argv + argc),
      {"model", "clients", "duration", "kills", "sessions", "cancel-fraction", "server-threads",
       "seed", "work-dir", "summary-json", "skip-ops", "server-args", "chat-fraction", "drop-page-cache",
       "tenants", "tenant-quota"},
      {"strict-busy", "tls", "help", "h"});
  if (!args.ok()) return Usage(std::string(args.status().message()));
  if (args->Has("help") || args->Has("h")) {
    std::cout << kUsage << kvs::load::kClassificationRules;
    return 0;
  }
  kvs::load::LoadOptions options;
  if (!args->Has("model")) return Usage("--model is required");
  options.model = *args->Get("model");
  absl::StatusOr<int64_t> clients = args->GetInt("clients", 64);
  absl::StatusOr<int64_t> kills = args->GetInt("kills", 3);
  absl::StatusOr<int64_t> sessions = args->GetInt("sessions", 0);
  absl::StatusOr<int64_t> threads = args->GetInt("server-threads", 2);
  absl::StatusOr<uint64_t> seed = args->GetUint64("seed", 1);
  absl::StatusOr<double> cancel = args->GetDouble("cancel-fraction", 0.05);
  absl::StatusOr<double> chat = args->GetDouble("chat-fraction", 0);
  absl::StatusOr<int64_t> tenants = args->GetInt("tenants", 0);
  for (const absl::Status& st : {clients.status(), kills.status(), sessions.status(), threads.status(),
                                 seed.status(), cancel.status(), chat.status(), tenants.status()}) {
    if (!st.ok()) return Usage(std::string(st.message()));
  }
  if (*clients < 1 || *clients > 1024) return Usage("--clients must be in [1, 1024]");
  if (*kills < 0 || *kills > 1000) return Usage("--kills must be in [0, 1000]");
  if (*sessions < 0) return Usage("--sessions must be >= 0");
  if (*threads < 1) return Usage("--server-threads must be >= 1");
  if (*cancel < 0 || *cancel > 1) return Usage("--cancel-fraction must be in [0, 1]");
  if (*chat < 0 || *chat > 1) return Usage("--chat-fraction must be in [0, 1]");
  if (*tenants < 0 || *tenants > 64) return Usage("--tenants must be in [0, 64]");
  if (*tenants > *clients) return Usage("--tenants must not exceed --clients (each tenant needs a client)");
  if (!ParseDuration(args->GetOr("duration", "30s"), &options.duration)) {
    return Usage("--duration must be a positive duration such as 30s or 10m");
  }
  options.clients = static_cast<int>(*clients);
  options.kills = static_cast<int>(*kills);
  options.target_sessions = static_cast<int>(*sessions);
  options.server_threads = static_cast<int>(*threads);
  options.seed = *seed;
  options.cancel_fraction = *cancel;
  options.chat_fraction = *chat;
  options.strict_busy = args->Has("strict-busy");
  options.tenants = static_cast<int>(*tenants);
  options.tls = args->Has("tls");
  if (args->Has("tenant-quota")) {
    if (*tenants < 2) return Usage("--tenant-quota needs --tenants of at least 2 (the others have none)");
    absl::StatusOr<std::vector<kvs::load::LoadQuota>> quotas =
        kvs::load::ParseLoadQuotas(*args->Get("tenant-quota"));
    if (!quotas.ok()) return Usage(std::string(quotas.status().message()));
    options.tenant_quotas = *std::move(quotas);
  }
  if (args->Has("drop-page-cache") &&
      !ParseDuration(*args->Get("drop-page-cache"), &options.drop_page_cache_every)) {
    return Usage("--drop-page-cache must be a positive duration such as 2s");
  }
  if (args->Has("server-args")) {
    options.server_args = absl::StrSplit(*args->Get("server-args"), ' ', absl::SkipEmpty());
  }
  if (args->Has("skip-ops")) {
    const std::vector<std::string> known = kvs::load::OperationNames();
    const std::vector<std::string> ops = absl::StrSplit(*args->Get("skip-ops"), ',', absl::SkipEmpty());
    for (const std::string& op : ops) {
      if (op == "create" || std::find(known.begin(), known.end(), op) == known.end()) {
        return Usage("--skip-ops: unknown or required operation (see the list below)");
      }
      options.skipped_ops.insert(op);
    }
  }
  const bool temporary = !args->Has("work-dir");
  options.work_dir = temporary ? (std::filesystem::temp_directory_path() /
                                  ("kvs_load_" + std::to_string(::getpid()))).string()
                               : *args->Get("work-dir");

  if (!std::filesystem::exists(options.model)) return Usage("--model: no such file");

  kvs::load::LoadReport report = kvs::load::LoadController(options).Run();
  kvs::load::PrintReport(report, stdout);
  std::fflush(stdout);
  if (args->Has("summary-json")) {
    std::ofstream(*args->Get("summary-json")) << kvs::load::SummaryJson(report) << "\n";
  }
  if (report.passed() && temporary) {
    std::error_code ignored;
    std::filesystem::remove_all(options.work_dir, ignored);
  } else if (!report.passed()) {
    std::printf("server data and logs kept in %s\n", options.work_dir.c_str());
  }
  return report.passed() ? 0 : 1;
}
