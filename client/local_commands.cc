#include "client/local_commands.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "cache/kv_sequence.h"
#include "client/cli_args.h"
#include "client/sampling_flags.h"
#include "model/chat_template.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/thread_pool.h"
#include "model/token_stream.h"
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

// What `kvsession run` was asked to do.
struct RunOptions {
  std::string model_path;
  std::string prompt;
  bool parse_special = false;
  SamplingParams sampling;
  int64_t n_predict = 128;
  int threads = 0;
  KvDtype kv_dtype = KvDtype::kF16;
  MatmulPath matmul = MatmulPath::kFast;
  bool json = false;
};

// What it did.
struct RunResult {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> generated;  // without a final end-of-generation token
  std::string text;
  FinishReason finish = FinishReason::kLength;
  double prefill_ms = 0;
  double decode_ms = 0;
  int decode_forwards = 0;
};

absl::StatusOr<RunOptions> ParseRunOptions(const std::vector<std::string>& argv) {
  std::set<std::string> value_flags = {"model", "prompt", "n", "kv-type", "threads", "matmul"};
  value_flags.insert(SamplingFlagNames().begin(), SamplingFlagNames().end());
  absl::StatusOr<CliArgs> args = CliArgs::Parse(argv, value_flags, {"json", "parse-special"});
  if (!args.ok()) return args.status();
  if (!args->Has("model")) return absl::InvalidArgumentError("run needs --model M.gguf");
  RunOptions o;
  o.model_path = *args->Get("model");
  absl::StatusOr<SamplingParams> params = ParseSamplingFlags(*args);
  if (!params.ok()) return params.status();
  o.sampling = *params;
  absl::StatusOr<int64_t> n_predict = args->GetInt("n", 128);
  absl::StatusOr<int64_t> n_threads = args->GetInt("threads", 0);
  if (!n_predict.ok()) return n_predict.status();
  if (!n_threads.ok()) return n_threads.status();
  if (*n_predict < 0) return absl::InvalidArgumentError("-n must be >= 0");
  o.n_predict = *n_predict;
  o.threads = static_cast<int>(*n_threads);
  const std::string kv_type = args->GetOr("kv-type", "f16");
  const std::optional<KvDtype> kv_dtype = KvDtypeFromName(kv_type);
  if (!kv_dtype) return absl::InvalidArgumentError("--kv-type must be f16, bf16, q8_0 or f32");
  o.kv_dtype = *kv_dtype;
  bool matmul_ok = false;
  o.matmul = ParseMatmulPath(args->GetOr("matmul", "fast"), &matmul_ok);
  if (!matmul_ok) return absl::InvalidArgumentError("--matmul must be fast or exact");
  o.prompt = args->GetOr("prompt", "");
  if (!IsValidUtf8(o.prompt)) return absl::InvalidArgumentError("--prompt is not valid UTF-8");
  o.parse_special = args->Has("parse-special");
  o.json = args->Has("json");
  return o;
}

// One forward pass of `tokens` after the sequence's current KV.
absl::Status Forward(Transformer& transformer, KvSequence& kv, std::span<const int32_t> tokens,
                     float* logits) {
  if (absl::Status s = kv.PrepareAppend(static_cast<int>(tokens.size())); !s.ok()) return s;
  ForwardItem item{&kv, tokens};
  return transformer.Forward({&item, 1}, logits);
}

// Prefills the prompt, then samples until the TokenStream ends generation
// (the same per-token rules as the server's engine), streaming text to
// stdout unless `json`.
absl::StatusOr<RunResult> Generate(const Model& m, const RunOptions& o, std::vector<int32_t> ids) {
  const ModelConfig& c = m.config();
  RunResult r;
  r.prompt_ids = ids;
  ThreadPool threads(o.threads);
  Transformer transformer(c, m.weights(), &threads, kPrefillChunk, c.context_length, o.matmul);
  const int max_tokens = static_cast<int>(std::min<int64_t>(c.context_length, ids.size() + o.n_predict));
  if (!KvDtypeFitsHeadDim(o.kv_dtype, c.head_dim)) {
    return absl::InvalidArgumentError(absl::StrCat("--kv-type ", KvDtypeName(o.kv_dtype),
                                                   " needs a head_dim that is a multiple of 32 and at most 1024; "
                                                   "the model's is ",
                                                   c.head_dim));
  }
  PagePool pages(transformer.kv_geometry(kPageTokens, o.kv_dtype), max_tokens / kPageTokens + 2);
  KvSequence kv(&pages);
  Sampler sampler(c.vocab_size);
  SequenceRng rng(o.sampling.seed);
  std::vector<float> logits(c.vocab_size);

  const auto prefill_start = Clock::now();
  for (size_t i = 0; i < ids.size(); i += kPrefillChunk) {
    const size_t n = std::min<size_t>(kPrefillChunk, ids.size() - i);
    if (absl::Status s = Forward(transformer, kv, std::span<const int32_t>(ids).subspan(i, n), logits.data());
        !s.ok()) {
      return s;
    }
  }
  r.prefill_ms = MsSince(prefill_start);

  const auto decode_start = Clock::now();
  TokenStreamOptions stream_options;
  stream_options.max_tokens = static_cast<int>(o.n_predict);
  stream_options.max_context = c.context_length;
  TokenStream stream(&m.tokenizer(), stream_options);
  for (int64_t i = 0; i < o.n_predict; ++i) {
    const int32_t next = sampler.Sample(o.sampling, logits, ids, &rng);
    ids.push_back(next);
    const std::string delta = stream.Push(next, static_cast<int>(ids.size()));
    if (!stream.IsStopToken(next)) r.generated.push_back(next);
    r.text += delta;
    if (!o.json && !delta.empty()) {
      std::fwrite(delta.data(), 1, delta.size(), stdout);
      std::fflush(stdout);
    }
    if (stream.finished()) break;
    if (absl::Status s = Forward(transformer, kv, {&ids.back(), 1}, logits.data()); !s.ok()) return s;
    ++r.decode_forwards;
  }
  if (stream.finished()) r.finish = stream.reason();
  r.decode_ms = MsSince(decode_start);
  const std::string tail = stream.Finish();
  r.text += tail;
  if (!o.json) std::fwrite(tail.data(), 1, tail.size(), stdout);
  return r;
}

void PrintRunResult(const Model& m, const RunOptions& o, const RunResult& r) {
  if (o.json) {
    nlohmann::json out;
    out["prompt_ids"] = r.prompt_ids;
    out["ids"] = r.generated;
    out["text"] = r.text;
    out["finish_reason"] = FinishReasonName(r.finish);
    out["seed"] = o.sampling.seed;
    out["timings"] = {
        {"load_ms", m.load_ms()},
        {"prefill_ms", r.prefill_ms},
        {"decode_ms", r.decode_ms},
        {"prefill_tok_s", r.prefill_ms > 0 ? r.prompt_ids.size() * 1000.0 / r.prefill_ms : 0.0},
        {"decode_tok_s",
         r.decode_ms > 0 && r.decode_forwards > 0 ? r.decode_forwards * 1000.0 / r.decode_ms : 0.0},
    };
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }
  std::cout << "\n";
  std::cerr << "finish_reason " << FinishReasonName(r.finish) << ", prompt " << r.prompt_ids.size()
            << " tokens in " << r.prefill_ms << " ms, " << r.generated.size()
            << " tokens generated in " << r.decode_ms << " ms\n";
}

}  // namespace

int RunCommand(const std::vector<std::string>& argv) {
  absl::StatusOr<RunOptions> options = ParseRunOptions(argv);
  if (!options.ok()) return Fail(options.status(), 2);
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Load(options->model_path, {.pack_for_fast_path = options->matmul == MatmulPath::kFast});
  if (!model.ok()) return Fail(model.status());
  std::cerr << (*model)->Summary() << "\n";
  const Model& m = **model;
  std::vector<int32_t> ids =
      m.tokenizer().Encode(options->prompt, /*add_special=*/true, options->parse_special);
  if (ids.empty()) {
    return Fail(absl::InvalidArgumentError("the prompt is empty and the vocabulary adds no BOS token"));
  }
  if (static_cast<int64_t>(ids.size()) >= m.config().context_length) {
    return Fail(absl::OutOfRangeError(absl::StrCat("the prompt is ", ids.size(),
                                                   " tokens; the model's context length is ",
                                                   m.config().context_length, " tokens")));
  }
  absl::StatusOr<RunResult> result = Generate(m, *options, std::move(ids));
  if (!result.ok()) return Fail(result.status());
  PrintRunResult(m, *options, *result);
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

namespace {

// The messages of a --messages file: a JSON array of {"role", "content"}
// objects. InvalidArgument naming the problem (never echoing the file).
absl::StatusOr<std::vector<ChatMessage>> ReadMessagesFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read --messages file ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  const nlohmann::json json = nlohmann::json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected a JSON array of {\"role\", \"content\"} objects"));
  }
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < json.size(); ++i) {
    const nlohmann::json& m = json[i];
    if (!m.is_object() || !m.contains("role") || !m.contains("content") || !m["role"].is_string() ||
        !m["content"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": message ", i, " is not an object with string \"role\" and \"content\""));
    }
    messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return messages;
}

}  // namespace

int RenderCommand(const std::vector<std::string>& argv) {
  absl::StatusOr<CliArgs> args =
      CliArgs::Parse(argv, {"model", "messages", "chat-template"},
                     {"json", "no-generation-prompt", "no-thinking"});
  if (!args.ok()) return Fail(args.status(), 2);
  if (!args->Has("model") || !args->Has("messages")) {
    return Fail(absl::InvalidArgumentError("render needs --model M.gguf and --messages FILE.json"),
                2);
  }
  absl::StatusOr<std::vector<ChatMessage>> messages = ReadMessagesFile(*args->Get("messages"));
  if (!messages.ok()) return Fail(messages.status(), 2);
  // Only the vocabulary and the template are needed.
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(*args->Get("model"));
  if (!gguf.ok()) return Fail(gguf.status());
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromGguf(**gguf);
  if (!tok.ok()) return Fail(tok.status());
  absl::StatusOr<ChatTemplate> chat =
      ChatTemplate::Create(**gguf, **tok, args->GetOr("chat-template", ""));
  if (!chat.ok()) return Fail(chat.status(), absl::IsInvalidArgument(chat.status()) ? 2 : 1);
  ChatRenderOptions options;
  options.add_generation_prompt = !args->Has("no-generation-prompt");
  options.enable_thinking = !args->Has("no-thinking");
  absl::StatusOr<RenderedChat> rendered = chat->RenderConversation(*messages, options);
  if (!rendered.ok()) return Fail(rendered.status(), 2);
  if (args->Has("json")) {
    nlohmann::json out;
    out["text"] = rendered->text;
    out["ids"] = rendered->ids;
    out["chat_template"] = std::string(ChatFamilyName(chat->format().family));
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << rendered->text << "\n";
    for (size_t i = 0; i < rendered->ids.size(); ++i) {
      std::cout << (i ? " " : "") << rendered->ids[i];
    }
    std::cout << "\n";
  }
  return 0;
}

}  // namespace kvs
