#include "client/local_commands.h"

#include <chrono>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "cache/kv_sequence.h"
#include "client/cli_args.h"
#include "client/sampling_flags.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/thread_pool.h"
#include "model/tokenizer.h"
#include "model/transformer.h"

namespace kvs {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

int Fail(const absl::Status& s, int code = 1) {
  std::cerr << "kvsession: " << s.message() << "\n";
  return code;
}

constexpr int kPageTokens = 16;
constexpr int kPrefillChunk = 512;

}  // namespace

int RunCommand(const std::vector<std::string>& argv) {
  std::set<std::string> value_flags = {"model", "prompt", "n", "kv-type", "threads", "matmul"};
  value_flags.insert(SamplingFlagNames().begin(), SamplingFlagNames().end());
  absl::StatusOr<CliArgs> args = CliArgs::Parse(argv, value_flags, {"json", "parse-special"});
  if (!args.ok()) return Fail(args.status(), 2);
  if (!args->Has("model")) return Fail(absl::InvalidArgumentError("run needs --model M.gguf"), 2);
  absl::StatusOr<SamplingParams> params = ParseSamplingFlags(*args);
  if (!params.ok()) return Fail(params.status(), 2);
  absl::StatusOr<int64_t> n_predict = args->GetInt("n", 128);
  absl::StatusOr<int64_t> n_threads = args->GetInt("threads", 0);
  if (!n_predict.ok()) return Fail(n_predict.status(), 2);
  if (!n_threads.ok()) return Fail(n_threads.status(), 2);
  if (*n_predict < 0) return Fail(absl::InvalidArgumentError("-n must be >= 0"), 2);
  const std::string kv_type = args->GetOr("kv-type", "f16");
  if (kv_type != "f16" && kv_type != "f32") {
    return Fail(absl::InvalidArgumentError("--kv-type must be f16 or f32"), 2);
  }
  const KvDtype dtype = kv_type == "f32" ? KvDtype::kF32 : KvDtype::kF16;
  bool matmul_ok = false;
  const MatmulPath matmul = ParseMatmulPath(args->GetOr("matmul", "fast"), &matmul_ok);
  if (!matmul_ok) return Fail(absl::InvalidArgumentError("--matmul must be fast or exact"), 2);
  const std::string prompt = args->GetOr("prompt", "");
  if (!IsValidUtf8(prompt)) return Fail(absl::InvalidArgumentError("--prompt is not valid UTF-8"), 2);
  const bool json = args->Has("json");

  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(*args->Get("model"), {.pack_for_fast_path = matmul == MatmulPath::kFast});
  if (!model.ok()) return Fail(model.status());
  std::cerr << (*model)->Summary() << "\n";
  const Model& m = **model;
  const ModelConfig& c = m.config();
  const Tokenizer& tok = m.tokenizer();

  std::vector<int32_t> ids = tok.Encode(prompt, /*add_special=*/true, args->Has("parse-special"));
  if (ids.empty()) {
    return Fail(absl::InvalidArgumentError("the prompt is empty and the vocabulary adds no BOS token"));
  }
  if (static_cast<int64_t>(ids.size()) >= c.context_length) {
    return Fail(absl::OutOfRangeError(absl::StrCat("the prompt is ", ids.size(),
                                                   " tokens; the model's context length is ",
                                                   c.context_length, " tokens")));
  }
  const std::vector<int32_t> prompt_ids = ids;

  ThreadPool threads(static_cast<int>(*n_threads));
  Transformer transformer(c, m.weights(), &threads, kPrefillChunk, c.context_length, matmul);
  const int max_tokens = static_cast<int>(std::min<int64_t>(c.context_length, ids.size() + *n_predict));
  PagePool pages(transformer.kv_geometry(kPageTokens, dtype), max_tokens / kPageTokens + 2);
  KvSequence kv(&pages);
  Sampler sampler(c.vocab_size);
  SequenceRng rng(params->seed);
  std::vector<float> logits(c.vocab_size);

  // Prefill in chunks.
  const auto prefill_start = Clock::now();
  for (size_t i = 0; i < ids.size(); i += kPrefillChunk) {
    ForwardItem item{&kv, std::span<const int32_t>(ids).subspan(i, std::min<size_t>(kPrefillChunk, ids.size() - i))};
    if (absl::Status s = kv.PrepareAppend(static_cast<int>(item.tokens.size())); !s.ok()) return Fail(s);
    if (absl::Status s = transformer.Forward({&item, 1}, logits.data()); !s.ok()) return Fail(s);
  }
  const double prefill_ms = MsSince(prefill_start);

  // Decode.
  std::vector<int32_t> generated;
  std::string text;
  Utf8StreamDecoder stream;
  std::string finish_reason = "length";
  const auto decode_start = Clock::now();
  int forwards = 0;
  while (static_cast<int64_t>(generated.size()) < *n_predict) {
    const int32_t next = sampler.Sample(*params, logits, ids, &rng);
    if (tok.IsEndOfGeneration(next)) {
      finish_reason = "stop_token";
      break;
    }
    generated.push_back(next);
    ids.push_back(next);
    std::string delta = stream.Push(tok.Piece(next));
    text += delta;
    if (!json && !delta.empty()) {
      std::fwrite(delta.data(), 1, delta.size(), stdout);
      std::fflush(stdout);
    }
    if (static_cast<int64_t>(generated.size()) == *n_predict) break;
    if (kv.length() + 1 > c.context_length - 0 || static_cast<int>(ids.size()) >= c.context_length) {
      finish_reason = "length";  // the context is full
      break;
    }
    ForwardItem item{&kv, {&ids.back(), 1}};
    if (absl::Status s = kv.PrepareAppend(1); !s.ok()) return Fail(s);
    if (absl::Status s = transformer.Forward({&item, 1}, logits.data()); !s.ok()) return Fail(s);
    ++forwards;
  }
  const double decode_ms = MsSince(decode_start);
  std::string tail = stream.Finish();
  text += tail;

  if (json) {
    nlohmann::json out;
    out["prompt_ids"] = prompt_ids;
    out["ids"] = generated;
    out["text"] = text;
    out["finish_reason"] = finish_reason;
    out["seed"] = params->seed;
    out["timings"] = {
        {"load_ms", m.load_ms()},
        {"prefill_ms", prefill_ms},
        {"decode_ms", decode_ms},
        {"prefill_tok_s", prefill_ms > 0 ? prompt_ids.size() * 1000.0 / prefill_ms : 0.0},
        {"decode_tok_s", decode_ms > 0 && forwards > 0 ? forwards * 1000.0 / decode_ms : 0.0},
    };
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::fwrite(tail.data(), 1, tail.size(), stdout);
    std::cout << "\n";
    std::cerr << "finish_reason " << finish_reason << ", prompt " << prompt_ids.size()
              << " tokens in " << prefill_ms << " ms, " << generated.size() << " tokens generated in "
              << decode_ms << " ms\n";
  }
  return 0;
}

int TokenizeCommand(const std::vector<std::string>& argv) {
  absl::StatusOr<CliArgs> args =
      CliArgs::Parse(argv, {"model", "text"}, {"json", "no-bos", "parse-special"});
  if (!args.ok()) return Fail(args.status(), 2);
  if (!args->Has("model")) return Fail(absl::InvalidArgumentError("tokenize needs --model M.gguf"), 2);
  const std::string text = args->GetOr("text", "");
  if (!IsValidUtf8(text)) return Fail(absl::InvalidArgumentError("--text is not valid UTF-8"), 2);
  // Only the vocabulary is needed: open the file and build the tokenizer.
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(*args->Get("model"));
  if (!gguf.ok()) return Fail(gguf.status());
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromGguf(**gguf);
  if (!tok.ok()) return Fail(tok.status());
  std::vector<int32_t> ids = (*tok)->Encode(text, !args->Has("no-bos"), args->Has("parse-special"));
  if (args->Has("json")) {
    nlohmann::json out;
    out["ids"] = ids;
    std::vector<std::string> pieces;
    for (int32_t id : ids) pieces.emplace_back((*tok)->token_text(id));
    out["tokens"] = pieces;
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
    std::cout << "\n";
  }
  return 0;
}

}  // namespace kvs
