// kvs-bench-tokenizer: Encode speed of every shared vocabulary
// (../shared/vocab/ggml-vocab-<name>.gguf), one thread, on three texts:
//   tokenizer/<vocab>/prose        60 paragraphs of mixed text (Latin with
//                                  accents, digits, CJK, an emoji, runs of
//                                  spaces, tabs and blank lines), 9.3 KB
//   tokenizer/<vocab>/long_word    one word of 20,000 letters
//   tokenizer/<vocab>/spaces       60,000 spaces, then "1"
// Counters: bytes/s of text in, tokens/s out, merge lookups per Encode. The `x4` rows encode four
// times the text (`spaces_x16` sixteen times); a row's time over the plain
// row's is the growth factor. The tests in model/tokenizer_test.cc and
// model/pretokenizer_work_test.cc assert that the work (matcher steps and
// merge lookups) grows linearly; this shows the time, which also pays the
// merge heap's log factor and its cache misses once a word's heap outgrows
// the caches (a run of spaces merged into multi-space tokens).
//
//   build/bin/kvs-bench-tokenizer --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Vocabularies missing from ../shared are skipped.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/cpu_name.h"
#include "model/gguf_file.h"
#include "model/tokenizer.h"
#include "model/tokenizer_sample_texts.h"

namespace kvs {
namespace {

constexpr const char* kVocabularies[] = {"llama-spm", "phi-3",     "gpt-2",  "deepseek-llm",
                                         "falcon",    "starcoder", "llama3", "qwen3"};

using sample_texts::LongWord;
using sample_texts::MixedProse;

std::string Spaces(int count) { return std::string(count, ' ') + "1"; }

struct Vocabulary {
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Tokenizer> tokenizer;
};

void EncodeText(benchmark::State& state, const Tokenizer* tokenizer, std::string text) {
  size_t tokens = 0;
  const uint64_t lookups_before = tokenizer->merge_lookups();
  for (auto _ : state) {
    std::vector<int32_t> ids = tokenizer->Encode(text, /*add_special=*/true);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
  // The merging work per Encode (model/tokenizer.h merge_lookups).
  state.counters["lookups"] = static_cast<double>(tokenizer->merge_lookups() - lookups_before) /
                              static_cast<double>(state.iterations());
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens),
                                                  benchmark::Counter::kIsIterationInvariantRate);
}

// Keeps the vocabularies alive for the benchmarks that point at them.
std::vector<Vocabulary>& Loaded() {
  static auto* const loaded = new std::vector<Vocabulary>();
  return *loaded;
}

void RegisterAll() {
  for (const char* name : kVocabularies) {
    const std::string path = absl::StrCat(KVS_SHARED_DIR, "/vocab/ggml-vocab-", name, ".gguf");
    if (!std::filesystem::exists(path)) continue;
    absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(path);
    if (!gguf.ok()) continue;
    absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf(**gguf);
    if (!tokenizer.ok()) continue;
    Loaded().push_back({*std::move(gguf), *std::move(tokenizer)});
    const Tokenizer* t = Loaded().back().tokenizer.get();
    struct Case {
      const char* label;
      std::string text;
    };
    const Case cases[] = {
        {"prose", MixedProse(60)},     {"prose_x4", MixedProse(240)},
        {"long_word", LongWord(20'000)}, {"long_word_x4", LongWord(80'000)},
        {"spaces", Spaces(60'000)},    {"spaces_x4", Spaces(240'000)},
        {"spaces_x16", Spaces(960'000)},
    };
    for (const Case& c : cases) {
      benchmark::RegisterBenchmark(absl::StrCat("tokenizer/", name, "/", c.label).c_str(), EncodeText,
                                   t, c.text)
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace
}  // namespace kvs

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("cpu", kvs::CpuModelName());
  kvs::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
