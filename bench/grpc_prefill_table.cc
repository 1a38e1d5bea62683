#include "bench/grpc_prefill_table.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "absl/strings/str_join.h"
#include "cache/kv_sequence.h"
#include "client/kvsession_client.h"
#include "bench/cpu_name.h"
#include "kernels/cpu_features.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "model/transformer.h"
#include "tests/server_process.h"

namespace kvs {
namespace {

namespace v1 = kvsession::v1;
using Clock = std::chrono::steady_clock;

constexpr int kChunk = 512;  // kvsession run's and the server's prefill chunk
constexpr int kPageTokens = 16;

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
}

// CPU seconds of each thread of `pid`, summed by thread name.
std::map<std::string, double> CpuByThreadName(pid_t pid) {
  std::map<std::string, double> out;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream stat(task.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    // Fields after the name start at 3 (state); utime and stime are 14, 15.
    double utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) utime = std::stod(field);
      if (i == 15) stime = std::stod(field);
    }
    out[line.substr(open + 1, close - open - 1)] += (utime + stime) / tick;
  }
  return out;
}

struct ServerCpu {
  double compute = 0;  // kvs-engine + kvs-compute
  double other = 0;    // everything else (persisting, gRPC, RocksDB)
};

ServerCpu CpuDelta(const std::map<std::string, double>& before, const std::map<std::string, double>& after) {
  ServerCpu d;
  for (const auto& [name, s] : after) {
    auto it = before.find(name);
    const double delta = s - (it == before.end() ? 0 : it->second);
    (name == "kvs-engine" || name == "kvs-compute" ? d.compute : d.other) += delta;
  }
  return d;
}

double ProcessCpuSeconds() {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Text of exactly `tokens` tokens after BOS (when the vocabulary adds one),
// different for each `variant` from its first token on (so no prefix of an
// earlier run is found in the server's cache).
std::string TextOfTokens(const Tokenizer& tok, int tokens, int variant) {
  static const char* kWords[] = {"the", "machine", "dreamed", "of", "vectors", "and", "quiet",
                                 "gradients", "under", "a", "pale", "sky", "while", "servers", "hummed"};
  std::string text = kWords[variant % 15];
  text += std::to_string(variant);
  for (int i = 0;; ++i) {
    std::string next = text + " " + kWords[(i * 7 + i / 3) % 15];
    if (static_cast<int>(tok.Encode(next, /*add_special=*/false).size()) > tokens) return text;
    text = std::move(next);
  }
}

// The in-process side: what `kvsession run` does to prefill.
class InProcess {
 public:
  InProcess(const Model& model, int threads, int max_tokens, KvDtype kv_dtype)
      : model_(model),
        pool_(threads),
        transformer_(model.config(), model.weights(), &pool_, kChunk, max_tokens + kChunk, MatmulPath::kFast),
        pages_(transformer_.kv_geometry(kPageTokens, kv_dtype), (max_tokens + kChunk) / kPageTokens + 2),
        logits_(model.config().vocab_size) {}

  int threads() const { return pool_.size(); }

  // Prefills the tokens of `text` (as the server tokenises it); returns
  // seconds of the forward passes (tokenising is not timed, as in
  // `kvsession run`).
  double Prefill(const std::string& text, int* n_tokens) {
    const std::vector<int32_t> ids = model_.tokenizer().Encode(text, /*add_special=*/true);
    *n_tokens = static_cast<int>(ids.size());
    KvSequence kv(&pages_);
    const auto start = Clock::now();
    for (size_t i = 0; i < ids.size(); i += kChunk) {
      const size_t n = std::min<size_t>(kChunk, ids.size() - i);
      ForwardItem item{&kv, std::span<const int32_t>(ids).subspan(i, n)};
      if (!kv.PrepareAppend(static_cast<int>(n)).ok() || !transformer_.Forward({&item, 1}, logits_.data()).ok()) {
        std::cerr << "in-process prefill failed\n";
        std::exit(1);
      }
    }
    return SecondsSince(start);
  }

 private:
  const Model& model_;
  ThreadPool pool_;
  Transformer transformer_;
  PagePool pages_;
  std::vector<float> logits_;
};

struct Row {
  int tokens = 0;
  std::vector<double> local_s, grpc_s, local_cpu, server_compute, server_other;
};

}  // namespace

int RunGrpcPrefillTable(const GrpcPrefillOptions& o) {
  const int threads = o.threads > 0 ? o.threads : AvailableCores();
  auto model = Model::Load(o.model, {.pack_for_fast_path = true});
  if (!model.ok()) {
    std::cerr << model.status().message() << "\n";
    return 1;
  }
  const int longest = *std::max_element(o.lengths.begin(), o.lengths.end());
  InProcess local(**model, threads, longest + 8, o.kv_dtype);

  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("kvs_bench_grpc_prefill_" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  ServerProcess server;
  std::vector<std::string> flags = {"--threads", std::to_string(threads), "--max-context",
                                    std::to_string(std::max(4096, longest + 64)),
                                    "--max-tokens-per-generate", "100000", "--kv-type",
                                    KvDtypeName(o.kv_dtype)};
  flags.insert(flags.end(), o.server_flags.begin(), o.server_flags.end());
  if (!server.Start(o.model, dir + "/data", flags)) {
    std::cerr << "kvsessiond did not start:\n" << server.log();
    return 1;
  }
  KvSessionClient client(server.address());
  client.WaitForServer(std::chrono::seconds(30));
  absl::StatusOr<v1::ServerInfo> info = client.GetServerInfo();
  if (!info.ok()) {
    std::cerr << "GetServerInfo: " << info.status() << "\n";
    return 1;
  }

  std::vector<Row> rows;
  int variant = 0;
  for (int length : o.lengths) {
    Row row;
    for (int r = 0; r < o.repeats; ++r) {
      // A/B in the same minute: in-process, then the same length over gRPC.
      int n = 0;
      const double cpu0 = ProcessCpuSeconds();
      row.local_s.push_back(local.Prefill(TextOfTokens((*model)->tokenizer(), length, ++variant), &n));
      row.local_cpu.push_back(ProcessCpuSeconds() - cpu0);
      row.tokens = n;

      v1::CreateSessionRequest create;
      create.mutable_input()->set_text(TextOfTokens((*model)->tokenizer(), length, ++variant));
      const auto before = CpuByThreadName(server.pid());
      const auto start = Clock::now();
      absl::StatusOr<v1::Session> s = client.CreateSession(create);
      row.grpc_s.push_back(SecondsSince(start));
      const ServerCpu cpu = CpuDelta(before, CpuByThreadName(server.pid()));
      if (!s.ok()) {
        std::cerr << "CreateSession: " << s.status() << "\n";
        return 1;
      }
      row.server_compute.push_back(cpu.compute);
      row.server_other.push_back(cpu.other);
      (void)client.DeleteSession(s->id());
    }
    rows.push_back(std::move(row));
  }
  server.Stop();
  std::filesystem::remove_all(dir);

  std::printf("prefill over gRPC (CreateSession with the text, a real kvsessiond) vs in-process "
              "(kvsession run's loop)\n%s\nCPU %s, kernels %s, KV %s, %d threads on both sides (server: %d), "
              "medians of %d, A/B alternating%s%s\n\n",
              (*model)->Summary().c_str(), CpuModelName().c_str(), ActiveKernelsName(), KvDtypeName(o.kv_dtype),
              threads, info->threads(), o.repeats, o.server_flags.empty() ? "" : "; server flags:",
              absl::StrJoin(o.server_flags, " ").c_str());
  std::printf("| prompt tokens | in-process tok/s | gRPC tok/s | gRPC time / in-process | target | "
              "CPU s in-process | server CPU s: compute | server CPU s: other (persist, gRPC) |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const Row& row : rows) {
    const double local = Median(row.local_s), grpc = Median(row.grpc_s);
    const double ratio = grpc / local;
    std::printf("| %d | %.1f | %.1f | %.2fx | <= 1.10x: %s | %.2f | %.2f | %.2f |\n", row.tokens,
                row.tokens / local, row.tokens / grpc, ratio, ratio <= 1.10 ? "met" : "missed",
                Median(row.local_cpu), Median(row.server_compute), Median(row.server_other));
  }
  return 0;
}

}  // namespace kvs
