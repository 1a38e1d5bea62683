#include "bench/llama_cpp_figures.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace kvs {
namespace bench {
namespace {

// One line of batched-bench's jsonl output.
struct BatchedBenchLine {
  int pp = 0, tg = 0, pl = 0;
  double speed_pp = 0, speed_tg = 0;
};

std::string Quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Runs `command` (stderr discarded) and parses every line that is a JSON
// object with the batched-bench fields.
absl::StatusOr<std::vector<BatchedBenchLine>> RunBatchedBench(const std::string& command) {
  FILE* pipe = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return absl::InternalError("cannot start llama-batched-bench");
  std::vector<BatchedBenchLine> lines;
  std::string line;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) {
    line += buf;
    if (line.empty() || line.back() != '\n') continue;
    if (line.front() == '{') {
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.contains("speed_tg")) {
        lines.push_back({j.value("pp", 0), j.value("tg", 0), j.value("pl", 0), j.value("speed_pp", 0.0),
                         j.value("speed_tg", 0.0)});
      }
    }
    line.clear();
  }
  const int status = ::pclose(pipe);
  if (status != 0 || lines.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("llama-batched-bench failed or printed no figures: ", command));
  }
  return lines;
}

}  // namespace

LlamaCppFigures IssueElevenFigures() {
  LlamaCppFigures f;
  f.source = "issue 11's figures (2-core AMD EPYC, Zen 4; not this run)";
  f.pp512 = 178;
  f.pp2000 = 107;
  f.pp4096 = 114;
  f.tg0 = 43.3;
  f.tg4096 = 17.3;
  f.batched8 = 46.2;
  return f;
}

absl::StatusOr<LlamaCppFigures> MeasureLlamaCpp(const LlamaCppRun& run) {
  const std::string bin = Quoted(run.bin_dir + "/llama-batched-bench");
  const std::string common =
      absl::StrFormat("%s -m %s -t %d -tb %d -b 2048 -ub 512 --output-format jsonl", bin, Quoted(run.model),
                      run.threads, run.threads);
  LlamaCppFigures f;
  f.measured = true;
  f.source = absl::StrFormat("llama.cpp measured in this run (%s, llama-batched-bench, %d threads, one run each)",
                             run.bin_dir, run.threads);
  // One sequence: each prompt, then 32 tokens decoded after it.
  const std::string prompts = run.long_context ? "1,512,2000,4096,8192,16384" : "1,512,2000,4096,8192";
  const int context = (run.long_context ? 16384 : 8192) + 64;
  auto single = RunBatchedBench(absl::StrFormat("%s -c %d -npp %s -ntg 32 -npl 1", common, context, prompts));
  if (!single.ok()) return single.status();
  for (const BatchedBenchLine& l : *single) {
    if (l.pl != 1) continue;
    switch (l.pp) {
      case 1: f.tg0 = l.speed_tg; break;
      case 512: f.pp512 = l.speed_pp; break;
      case 2000: f.pp2000 = l.speed_pp; break;
      case 4096: f.pp4096 = l.speed_pp; f.tg4096 = l.speed_tg; break;
      case 8192: f.pp8192 = l.speed_pp; break;
      case 16384: f.tg16384 = l.speed_tg; break;
      default: break;
    }
  }
  // Eight sequences after one shared prompt.
  auto batched = RunBatchedBench(absl::StrFormat("%s -c %d -npp 512 -ntg 64 -npl 8 -pps", common, 512 + 8 * 64 + 64));
  if (!batched.ok()) return batched.status();
  for (const BatchedBenchLine& l : *batched) {
    if (l.pl == 8) f.batched8 = l.speed_tg;
  }
  return f;
}

}  // namespace bench
}  // namespace kvs
