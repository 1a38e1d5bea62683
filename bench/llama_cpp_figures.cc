#include "bench/llama_cpp_figures.h"

#include <algorithm>
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

// Whether this llama-batched-bench takes `-fa on|off|auto` (builds from
// 2025 on, whose default "auto" turns flash attention on for the CPU) rather
// than build 4748's bare `-fa` switch (off unless given).
bool TakesFlashAttentionModes(const std::string& bin) {
  FILE* pipe = ::popen((bin + " --help 2>&1").c_str(), "r");
  if (pipe == nullptr) return false;
  bool modes = false;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) {
    if (std::string(buf).find("--flash-attn [on|off|auto]") != std::string::npos) modes = true;
  }
  ::pclose(pipe);
  return modes;
}

// Every row measured once with `common` (which already names the flash
// attention setting, or nothing); `shared_prompt` is added to the batched
// run's flags.
absl::StatusOr<LlamaCppFigures> MeasureOnce(const std::string& common, const std::string& shared_prompt,
                                            const LlamaCppRun& run) {
  LlamaCppFigures f;
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
  auto batched = RunBatchedBench(
      absl::StrFormat("%s%s -c %d -npp 512 -ntg 64 -npl 8 -pps", common, shared_prompt, 512 + 8 * 64 + 64));
  if (!batched.ok()) return batched.status();
  for (const BatchedBenchLine& l : *batched) {
    if (l.pl == 8) f.batched8 = l.speed_tg;
  }
  return f;
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
  if (!TakesFlashAttentionModes(bin)) {
    // Build 4748 and its time: the defaults (flash attention off).
    auto f = MeasureOnce(common, "", run);
    if (!f.ok()) return f.status();
    f->measured = true;
    f->source = absl::StrFormat("llama.cpp measured in this run (%s, llama-batched-bench, %d threads, one run each)",
                                run.bin_dir, run.threads);
    return f;
  }
  // A newer build: flash attention on (its default on the CPU) is faster at
  // prefill and slower at long-context decode than off, so each row keeps
  // the faster of the two. Its cache is per sequence unless asked for one
  // unified buffer (-kvu), which the 8 sequences need to share their
  // prompt's cells, as build 4748's did and as forks share pages.
  auto on = MeasureOnce(common + " -fa on", " -kvu", run);
  if (!on.ok()) return on.status();
  auto off = MeasureOnce(common + " -fa off", " -kvu", run);
  if (!off.ok()) return off.status();
  LlamaCppFigures f;
  f.measured = true;
  f.source = absl::StrFormat(
      "llama.cpp measured in this run (%s, llama-batched-bench, %d threads, one run each with -fa on and -fa off, "
      "the faster per row)",
      run.bin_dir, run.threads);
  for (double LlamaCppFigures::*field : {&LlamaCppFigures::pp512, &LlamaCppFigures::pp2000, &LlamaCppFigures::pp4096,
                                         &LlamaCppFigures::pp8192, &LlamaCppFigures::tg0, &LlamaCppFigures::tg4096,
                                         &LlamaCppFigures::tg16384, &LlamaCppFigures::batched8}) {
    f.*field = std::max((*on).*field, (*off).*field);
  }
  return f;
}

}  // namespace bench
}  // namespace kvs
