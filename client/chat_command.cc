#include "client/chat_command.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "cache/kv_sequence.h"
#include "cache/page_pool.h"
#include "client/cli_args.h"
#include "client/cli_connection.h"
#include "client/kvsession_client.h"
#include "client/sampling_flags.h"
#include "model/chat_template.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/thread_pool.h"
#include "model/token_stream.h"
#include "model/transformer.h"

namespace kvs {
namespace v1 = kvsession::v1;
namespace {

using Json = nlohmann::json;

constexpr int kPageTokens = 16;
constexpr int kPrefillChunk = 512;

int Usage(const absl::Status& s) {
  std::cerr << "kvsession chat: " << s.message() << "\n";
  return 2;
}

int Failed(const absl::Status& s) {
  std::cerr << "kvsession chat: " << absl::StatusCodeToString(s.code()) << ": " << s.message()
            << "\n";
  return 1;
}

void Write(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

void PrintJson(const Json& j) {
  std::cout << j.dump(-1, ' ', false, Json::error_handler_t::replace) << std::endl;
}

// The next user line (non-empty), or false at end of input.
bool ReadLine(std::string* line) {
  const bool tty = ::isatty(0);
  while (true) {
    if (tty) std::cerr << "> " << std::flush;
    if (!std::getline(std::cin, *line)) return false;
    if (!line->empty() && line->back() == '\r') line->pop_back();
    if (!line->empty()) return true;
  }
}

v1::ChatMessage Message(const std::string& role, const std::string& content) {
  v1::ChatMessage m;
  m.set_role(role);
  m.set_content(content);
  return m;
}

int RemoteChat(const CliArgs& args, int max_tokens) {
  absl::StatusOr<std::unique_ptr<KvSessionClient>> connected = ConnectFromFlags(args);
  if (!connected.ok()) return Usage(connected.status());
  KvSessionClient& client = **connected;
  v1::SamplingParams sampling;
  if (absl::Status s = SamplingFlagsToProto(args, &sampling); !s.ok()) return Usage(s);
  const bool json = args.Has("json");
  std::string session = args.GetOr("session", "");
  if (session.empty()) {
    absl::StatusOr<v1::Session> s = client.CreateSession(v1::CreateSessionRequest());
    if (!s.ok()) return Failed(s.status());
    session = s->id();
    std::cerr << "session " << session << "\n";
  }
  std::optional<std::string> system = args.Get("system");
  std::string line;
  while (ReadLine(&line)) {
    v1::GenerateRequest req;
    req.set_session_id(session);
    req.set_max_tokens(max_tokens);
    *req.mutable_sampling() = sampling;
    if (args.Has("no-thinking")) req.set_enable_thinking(false);
    v1::ChatMessages* messages = req.mutable_input()->mutable_messages();
    if (system) *messages->add_messages() = Message("system", *std::exchange(system, std::nullopt));
    *messages->add_messages() = Message("user", line);
    absl::StatusOr<GenerateResult> r = client.Generate(req, [json](const v1::GenerateResponse& m) {
      if (!json) Write(m.text());
      return true;
    });
    if (!r.ok()) {
      if (!json) Write("\n");
      return Failed(r.status());
    }
    if (json) {
      PrintJson({{"session", session},
                 {"ids", r->ids},
                 {"text", r->text},
                 {"finish_reason", FinishReasonName(r->finish_reason)},
                 {"usage",
                  {{"prompt_tokens", r->usage.prompt_tokens()},
                   {"cached_tokens", r->usage.cached_tokens()},
                   {"generated_tokens", r->usage.generated_tokens()},
                   {"session_tokens", r->usage.session_tokens()}}}});
    } else {
      Write("\n");
    }
  }
  return 0;
}

// The same conversation in this process: the session's tokens, its KV
// (covering every token but those appended since the last forward pass),
// and one turn at a time rendered with the model's template.
class LocalChat {
 public:
  LocalChat(const Model& model, ChatTemplate chat, SamplingParams sampling)
      : model_(model),
        chat_(std::move(chat)),
        sampling_(std::move(sampling)),
        threads_(0),
        transformer_(model.config(), model.weights(), &threads_, kPrefillChunk,
                     model.config().context_length, MatmulPath::kFast),
        pages_(transformer_.kv_geometry(kPageTokens, KvDtype::kF16),
               model.config().context_length / kPageTokens + 2),
        kv_(&pages_),
        sampler_(model.config().vocab_size),
        rng_(sampling_.seed),
        logits_(model.config().vocab_size) {}

  // Appends the user turn (and a system message first, if given), starts
  // an assistant turn and generates it, streaming unless `json`.
  absl::StatusOr<Json> Turn(const std::vector<ChatMessage>& messages, int max_tokens,
                            bool enable_thinking, bool json) {
    std::vector<int32_t> input;
    if (turn_open_) input = chat_.RenderEndOfTurn().ids;
    const auto follows = [&] {
      return ChatTemplate::FollowsOf(
          input.empty() ? std::span<const int32_t>(tokens_) : std::span<const int32_t>(input), model_.tokenizer());
    };
    absl::StatusOr<RenderedChat> turn = chat_.RenderAppended(messages, started_, follows());
    if (!turn.ok()) return turn.status();
    input.insert(input.end(), turn->ids.begin(), turn->ids.end());
    const RenderedChat prompt = chat_.RenderGenerationPrompt({true, enable_thinking}, follows());
    input.insert(input.end(), prompt.ids.begin(), prompt.ids.end());
    const int context = model_.config().context_length;
    if (tokens_.size() + input.size() >= static_cast<size_t>(context)) {
      return absl::OutOfRangeError(absl::StrCat("the conversation would exceed the context of ",
                                                context, " tokens"));
    }
    started_ = true;
    turn_open_ = true;
    const int prompt_tokens = static_cast<int>(input.size());
    tokens_.insert(tokens_.end(), input.begin(), input.end());
    if (absl::Status s = CatchUp(); !s.ok()) return s;

    TokenStreamOptions options;
    options.max_tokens = max_tokens;
    options.max_context = context;
    TokenStream stream(&model_.tokenizer(), options);
    std::vector<int32_t> ids;
    std::string text;
    while (true) {
      const int32_t next = sampler_.Sample(sampling_, logits_, tokens_, &rng_);
      tokens_.push_back(next);
      ids.push_back(next);
      const std::string delta = stream.Push(next, static_cast<int>(tokens_.size()));
      text += delta;
      if (!json) Write(delta);
      if (stream.finished()) break;
      if (absl::Status s = CatchUp(); !s.ok()) return s;
    }
    const std::string tail = stream.Finish();
    text += tail;
    if (!json) Write(tail + "\n");
    const std::vector<int32_t>& eot = chat_.end_of_turn_ids();
    if (stream.reason() == FinishReason::kStopToken &&
        std::binary_search(eot.begin(), eot.end(), ids.back())) {
      const RenderedChat after = chat_.RenderAfterEndOfTurn();
      tokens_.insert(tokens_.end(), after.ids.begin(), after.ids.end());
      turn_open_ = false;
    }
    return Json{{"ids", ids},
                {"text", text},
                {"finish_reason", FinishReasonName(stream.reason())},
                {"usage",
                 {{"prompt_tokens", prompt_tokens},
                  {"generated_tokens", static_cast<int>(ids.size())},
                  {"session_tokens", static_cast<int>(tokens_.size())}}}};
  }

 private:
  // Runs the tokens not yet in the KV through the model (the last one's
  // logits are what the next token is sampled from).
  absl::Status CatchUp() {
    while (kv_.length() < static_cast<int>(tokens_.size())) {
      const int n = std::min<int>(kPrefillChunk, static_cast<int>(tokens_.size()) - kv_.length());
      if (absl::Status s = kv_.PrepareAppend(n); !s.ok()) return s;
      ForwardItem item{&kv_, std::span<const int32_t>(tokens_).subspan(kv_.length(), n)};
      if (absl::Status s = transformer_.Forward({&item, 1}, logits_.data()); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  const Model& model_;
  const ChatTemplate chat_;
  const SamplingParams sampling_;
  ThreadPool threads_;
  Transformer transformer_;
  PagePool pages_;
  KvSequence kv_;
  Sampler sampler_;
  SequenceRng rng_;
  std::vector<float> logits_;
  std::vector<int32_t> tokens_;
  bool started_ = false;
  bool turn_open_ = false;
};

int LocalChatLoop(const CliArgs& args, int max_tokens) {
  absl::StatusOr<SamplingParams> sampling = ParseSamplingFlags(args);
  if (!sampling.ok()) return Usage(sampling.status());
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(*args.Get("model"));
  if (!model.ok()) return Failed(model.status());
  absl::StatusOr<ChatTemplate> chat =
      ChatTemplate::Create((*model)->gguf(), (*model)->tokenizer(), args.GetOr("chat-template", ""));
  if (!chat.ok()) return Failed(chat.status());
  LocalChat session(**model, *std::move(chat), *sampling);
  const bool json = args.Has("json");
  std::optional<std::string> system = args.Get("system");
  std::string line;
  while (ReadLine(&line)) {
    std::vector<ChatMessage> messages;
    if (system) messages.push_back({"system", *std::exchange(system, std::nullopt)});
    messages.push_back({"user", line});
    absl::StatusOr<Json> turn = session.Turn(messages, max_tokens, !args.Has("no-thinking"), json);
    if (!turn.ok()) return Failed(turn.status());
    if (json) PrintJson(*turn);
  }
  return 0;
}

}  // namespace

int ChatCommand(const std::vector<std::string>& argv) {
  std::set<std::string> value_flags = {"server", "session", "model", "system", "n", "chat-template"};
  value_flags.insert(SamplingFlagNames().begin(), SamplingFlagNames().end());
  value_flags.insert(ConnectionValueFlags().begin(), ConnectionValueFlags().end());
  std::set<std::string> bool_flags = {"json", "no-thinking"};
  bool_flags.insert(ConnectionBoolFlags().begin(), ConnectionBoolFlags().end());
  absl::StatusOr<CliArgs> args = CliArgs::Parse(argv, value_flags, bool_flags);
  if (!args.ok()) return Usage(args.status());
  absl::StatusOr<int64_t> n = args->GetInt("n", 512);
  if (!n.ok()) return Usage(n.status());
  if (*n < 1) return Usage(absl::InvalidArgumentError("-n must be >= 1"));
  if (args->Has("model")) {
    if (args->Has("session") || args->Has("server")) {
      return Usage(absl::InvalidArgumentError("--model runs locally: give it without --session or --server"));
    }
    return LocalChatLoop(*args, static_cast<int>(*n));
  }
  return RemoteChat(*args, static_cast<int>(*n));
}

}  // namespace kvs
