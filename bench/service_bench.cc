// service_bench: the service end to end, against a real kvsessiond started
// by the benchmark (loopback gRPC, RocksDB store in a temp dir).
//
//   build/bin/kvs-bench-service --model M.gguf [--prompt-tokens 256]
//       [--gen 64] [--repeats 3] [--turns 8] [--long-tokens 1500]
//       [--restore-tokens 2000] [--table fanout|turns|long|restore|all]
//       [--kv-type f16|bf16|q8_0|f32]   (the server's KV type; default f16)
//       [--top-k K]   (the fan-out's Generate calls; default: the server's)
//       [--page-writes direct|buffered]   (the server's; default direct)
//
// Prints four tables (medians over --repeats; --table picks one):
//   1. fork fan-out: 1, 2, 4, 8 branches of one prompt generating --gen
//      tokens each at once; aggregate tok/s and speed-up over one stream;
//      with the server's default sampling, or with --top-k 0 (top-k off,
//      as OpenAI-style clients send: the whole vocabulary is sorted for
//      top-p at every token);
//   2. per conversation turn (append 32 tokens, generate 32): the bytes the
//      store grows by (only new KV pages are written), time of the turn,
//      and a Snapshot's bytes and time;
//   3. bringing a long session back after a restart (KV read from disk)
//      versus computing it again (prefill);
//   4. restore of a --restore-tokens session after a restart, page cache
//      warm and cold, against the disk's measured read bandwidth
//      (bench/restore_table.h).
//
//   build/bin/kvs-bench-service --model M.gguf --table grpc-prefill
//       [--threads N] [--repeats 3] [--lengths 512,2000]
//       [--kv-type f16|bf16|q8_0|f32]   (both sides' KV type; default f16)
//       [--page-writes direct|buffered] [--server-flags 'F1 F2']   (more kvsessiond flags)
// prints instead the prefill over gRPC against in-process (grpc_prefill_table.h).
//
//   build/bin/kvs-bench-service --model M.gguf --table startup
//       [--startup-sessions 0,250,1000] [--startup-tokens 512] [--repeats 3]
//       [--kv-type f16|bf16|q8_0|f32] [--server-flags 'F1 F2']
//       [--kvsessiond BIN1,BIN2] [--startup-pause S]
// prints instead how long a restart takes to serve, by the store's size;
// with two or more kvsessiond binaries, each restart by each in turn, side
// by side (startup_table.h).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "bench/restore_table.h"
#include "bench/startup_table.h"
#include "client/cli_args.h"
#include "bench/grpc_prefill_table.h"
#include "client/kvsession_client.h"
#include "kernels/kv_dtype.h"
#include "tests/server_process.h"

namespace kvs {
namespace {

namespace v1 = kvsession::v1;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Text of roughly `tokens` tokens for SentencePiece/BPE vocabularies.
std::string TextOfTokens(int tokens) {
  static const char* kWords[] = {"the", "machine", "dreamed", "of", "vectors", "and", "quiet",
                                 "gradients", "under", "a", "pale", "sky", "while", "servers", "hummed"};
  std::string s;
  for (int i = 0; i < tokens; ++i) {
    s += (i ? " " : "");
    s += kWords[(i * 7 + i / 3) % 15];
  }
  return s;
}

void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::cerr << what << ": " << s << "\n";
    std::exit(1);
  }
}

// --table grpc-prefill: its own servers and in-process runs (grpc_prefill_table.h).
int RunTable(const CliArgs& args) {
  if (args.GetOr("table", "") != "grpc-prefill") {
    std::cerr << "--table must be grpc-prefill\n";
    return 2;
  }
  GrpcPrefillOptions o;
  o.model = *args.Get("model");
  o.threads = static_cast<int>(args.GetInt("threads", 0).value_or(0));
  o.repeats = static_cast<int>(args.GetInt("repeats", 3).value_or(3));
  const std::optional<KvDtype> kv_dtype = KvDtypeFromName(args.GetOr("kv-type", "f16"));
  if (!kv_dtype) {
    std::cerr << "--kv-type must be f16, bf16, q8_0 or f32\n";
    return 2;
  }
  o.kv_dtype = *kv_dtype;
  if (args.Has("page-writes")) o.server_flags = {"--page-writes", args.GetOr("page-writes", "")};
  // Any other kvsessiond flags, space-separated (e.g. "--sync-writes=false"),
  // to take a part of the server's path out of the comparison.
  const std::vector<std::string> more = absl::StrSplit(args.GetOr("server-flags", ""), ' ', absl::SkipEmpty());
  o.server_flags.insert(o.server_flags.end(), more.begin(), more.end());
  if (args.Has("lengths")) {
    o.lengths.clear();
    std::stringstream list(args.GetOr("lengths", ""));
    for (std::string n; std::getline(list, n, ',');) o.lengths.push_back(std::atoi(n.c_str()));
    if (o.lengths.empty() || *std::min_element(o.lengths.begin(), o.lengths.end()) < 1) {
      std::cerr << "--lengths must be a comma-separated list of token counts >= 1\n";
      return 2;
    }
  }
  return RunGrpcPrefillTable(o);
}

// --table startup: its own server and store (startup_table.h).
int RunStartup(const CliArgs& args) {
  StartupTableOptions o;
  o.model = *args.Get("model");
  o.dir = (std::filesystem::temp_directory_path() / ("kvs_bench_startup_" + std::to_string(::getpid()))).string();
  o.repeats = static_cast<int>(args.GetInt("repeats", 3).value_or(3));
  o.tokens = static_cast<int>(args.GetInt("startup-tokens", 512).value_or(512));
  o.pause_s = static_cast<int>(args.GetInt("startup-pause", 0).value_or(-1));
  o.servers = absl::StrSplit(args.GetOr("kvsessiond", ""), ',', absl::SkipEmpty());
  for (const std::string& binary : o.servers) {
    if (::access(binary.c_str(), X_OK) != 0) {
      std::cerr << "--kvsessiond: a binary is not executable\n";
      return 2;
    }
  }
  if (args.Has("startup-sessions")) {
    o.sessions.clear();
    std::stringstream list(args.GetOr("startup-sessions", ""));
    for (std::string n; std::getline(list, n, ',');) o.sessions.push_back(std::atoi(n.c_str()));
  }
  if (o.sessions.empty() || !std::is_sorted(o.sessions.begin(), o.sessions.end()) || o.sessions.front() < 0 ||
      o.tokens < 1 || o.repeats < 1 || o.pause_s < 0) {
    std::cerr << "--startup-sessions must be ascending counts >= 0, --startup-tokens and --repeats >= 1, "
                 "--startup-pause >= 0\n";
    return 2;
  }
  o.server_flags = {"--kv-type", args.GetOr("kv-type", "f16"), "--max-sessions",
                    std::to_string(std::max(10000, o.sessions.back()))};
  const std::vector<std::string> more = absl::StrSplit(args.GetOr("server-flags", ""), ' ', absl::SkipEmpty());
  o.server_flags.insert(o.server_flags.end(), more.begin(), more.end());
  std::filesystem::create_directories(o.dir);
  const int result = PrintStartupTable(o);
  std::filesystem::remove_all(o.dir);
  return result;
}

int Main(int argc, char** argv) {
  auto args = CliArgs::Parse(std::vector<std::string>(argv + 1, argv + argc),
                             {"model", "prompt-tokens", "gen", "repeats", "turns", "long-tokens", "threads",
                              "restore-tokens", "table", "lengths", "kv-type", "top-k", "page-writes", "server-flags",
                              "startup-sessions", "startup-tokens", "kvsessiond", "startup-pause"},
                             {});
  if (!args.ok() || !args->Has("model")) {
    std::cerr << "usage: kvs-bench-service --model M.gguf [--prompt-tokens 256] [--gen 64] "
                 "[--repeats 3] [--turns 8] [--long-tokens 1500] [--restore-tokens 2000] "
                 "[--table fanout|turns|long|restore|all|grpc-prefill|startup] "
                 "[--kv-type f16|bf16|q8_0|f32] [--top-k K] "
                 "[--page-writes direct|buffered] [--server-flags 'F1 F2' (grpc-prefill only)]\n";
    return 2;
  }
  const std::string model = *args->Get("model");
  if (args->GetOr("table", "") == "grpc-prefill") return RunTable(*args);
  if (args->GetOr("table", "") == "startup") return RunStartup(*args);
  const int prompt_tokens = static_cast<int>(args->GetInt("prompt-tokens", 256).value_or(256));
  const int gen = static_cast<int>(args->GetInt("gen", 64).value_or(64));
  const int repeats = static_cast<int>(args->GetInt("repeats", 3).value_or(3));
  const int turns = static_cast<int>(args->GetInt("turns", 8).value_or(8));
  const int long_tokens = static_cast<int>(args->GetInt("long-tokens", 1500).value_or(1500));
  const int restore_tokens = static_cast<int>(args->GetInt("restore-tokens", 2000).value_or(2000));
  const std::string table = args->GetOr("table", "all");
  const int top_k = static_cast<int>(args->GetInt("top-k", -1).value_or(-1));  // -1: the server's default
  if (table != "all" && table != "fanout" && table != "turns" && table != "long" &&
      table != "restore") {
    std::cerr << "--table must be fanout, turns, long, restore, all, grpc-prefill or startup\n";
    return 2;
  }
  auto wants = [&](const char* name) { return table == "all" || table == name; };

  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("kvs_bench_service_" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  const std::string data = dir + "/data";
  // A bounded context, so the default KV pool holds a full-context session
  // of any model; longer only for a longer --restore-tokens session.
  const int max_context = std::max(4096, restore_tokens);
  const std::vector<std::string> server_flags = {"--max-tokens-per-generate", "100000", "--max-context",
                                                 std::to_string(max_context), "--kv-type",
                                                 args->GetOr("kv-type", "f16"), "--page-writes",
                                                 args->GetOr("page-writes", "direct")};
  auto server = std::make_unique<ServerProcess>();
  if (!server->Start(model, data, server_flags)) {
    std::cerr << "kvsessiond did not start:\n" << server->log();
    return 1;
  }
  auto client = std::make_unique<KvSessionClient>(server->address());
  client->WaitForServer(std::chrono::seconds(10));
  absl::StatusOr<v1::ServerInfo> info = client->GetServerInfo();
  Check(info.status(), "GetServerInfo");
  std::printf("model %s (%s, %s), kernels %s, %d threads, KV %s\n\n", info->model().name().c_str(),
              info->model().architecture().c_str(), info->model().weight_type().c_str(),
              info->kernels().c_str(), info->threads(), info->kv_cache().dtype().c_str());

  if (wants("restore")) {
    RestoreTableOptions restore{.model = model,
                                .dir = dir,
                                .tokens = restore_tokens,
                                .server_flags = server_flags,
                                .repeats = repeats};
    if (PrintRestoreTable(restore) != 0) return 1;
  }

  // 1. Fork fan-out.
  if (wants("fanout")) {
  v1::CreateSessionRequest create;
  create.mutable_input()->set_text(TextOfTokens(prompt_tokens));
  absl::StatusOr<v1::Session> root = client->CreateSession(create);
  Check(root.status(), "CreateSession");
  std::printf("fan-out sampling: %s\n\n",
              top_k < 0 ? "the server's defaults (top-k 40)"
                        : ("top-k " + std::to_string(top_k) + " (0: off), top-p 0.95").c_str());
  std::printf("| branches | prompt tokens | tokens each | aggregate tok/s | x single stream |\n");
  std::printf("|---|---|---|---|---|\n");
  double single = 0;
  for (int branches : {1, 2, 4, 8}) {
    std::vector<double> rates;
    for (int r = 0; r < repeats; ++r) {
      v1::ForkRequest fork;
      fork.set_session_id(root->id());
      fork.set_count(branches);
      absl::StatusOr<v1::ForkResponse> forked = client->Fork(fork);
      Check(forked.status(), "Fork");
      const auto start = Clock::now();
      std::vector<std::thread> threads;
      for (const auto& b : forked->sessions()) {
        threads.emplace_back([&, id = b.id()] {
          v1::GenerateRequest req;
          req.set_session_id(id);
          req.set_max_tokens(gen);
          req.set_ignore_eos(true);
          if (top_k >= 0) req.mutable_sampling()->set_top_k(top_k);
          Check(client->Generate(req).status(), "Generate");
        });
      }
      for (auto& t : threads) t.join();
      rates.push_back(branches * gen / Seconds(start));
      for (const auto& b : forked->sessions()) (void)client->DeleteSession(b.id());
    }
    const double rate = Median(rates);
    if (branches == 1) single = rate;
    std::printf("| %d | %d | %d | %.1f | %.2f |\n", branches, root->length(), gen, rate, rate / single);
  }
  }

  // 2. Conversation turns: incremental persistence and snapshots.
  if (wants("turns")) {
  std::printf("\n| turn | session tokens | store growth (bytes) | turn time (ms) | snapshot bytes | snapshot ms |\n");
  std::printf("|---|---|---|---|---|---|\n");
  absl::StatusOr<v1::Session> chat = client->CreateSession(TextOfTokens(32));
  Check(chat.status(), "CreateSession");
  for (int t = 1; t <= turns; ++t) {
    const int64_t before = client->GetServerInfo()->store().page_bytes();
    const auto start = Clock::now();
    Check(client->Append(chat->id(), " " + TextOfTokens(32)).status(), "Append");
    v1::GenerateRequest req;
    req.set_session_id(chat->id());
    req.set_max_tokens(32);
    req.set_ignore_eos(true);
    absl::StatusOr<GenerateResult> g = client->Generate(req);
    Check(g.status(), "Generate");
    const double turn_ms = Seconds(start) * 1000;
    const int64_t grown = client->GetServerInfo()->store().page_bytes() - before;
    const auto snap_start = Clock::now();
    absl::StatusOr<v1::Checkpoint> ckpt = client->Snapshot(chat->id());
    Check(ckpt.status(), "Snapshot");
    std::printf("| %d | %d | %lld | %.1f | %lld | %.1f |\n", t, g->usage.session_tokens(),
                static_cast<long long>(grown), turn_ms, static_cast<long long>(ckpt->bytes_written()),
                Seconds(snap_start) * 1000);
  }
  }

  // 3. Restore from disk vs re-prefill of a long session.
  if (wants("long")) {
  const int max_context = info->limits().max_context();
  const int long_len = std::min(long_tokens, max_context - 8);
  std::vector<double> restore_ms, prefill_ms;
  int long_session_tokens = 0;
  for (int r = 0; r < repeats; ++r) {
    // A different first word each time, so no prefix is found in the cache.
    const std::string long_text = std::to_string(1000 + r) + " " + TextOfTokens(long_len);
    const auto p0 = Clock::now();
    absl::StatusOr<v1::Session> s = client->CreateSession(long_text);
    Check(s.status(), "CreateSession(long)");
    prefill_ms.push_back(Seconds(p0) * 1000);
    long_session_tokens = s->length();
    if (server->Stop() != 0) std::cerr << "server did not stop cleanly\n";
    server = std::make_unique<ServerProcess>();
    if (!server->Start(model, data, server_flags)) return 1;
    client = std::make_unique<KvSessionClient>(server->address());
    client->WaitForServer(std::chrono::seconds(10));
    const auto r0 = Clock::now();
    Check(client->RestoreSession(s->id()).status(), "Restore");
    restore_ms.push_back(Seconds(r0) * 1000);
  }
  std::printf("\n| session tokens | re-prefill ms (CreateSession) | restore from disk ms | speed-up |\n");
  std::printf("|---|---|---|---|\n");
  std::printf("| %d | %.1f | %.1f | %.1fx |\n", long_session_tokens, Median(prefill_ms),
              Median(restore_ms), Median(prefill_ms) / std::max(1e-3, Median(restore_ms)));
  }
  server->Stop();
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace kvs

int main(int argc, char** argv) { return kvs::Main(argc, argv); }
